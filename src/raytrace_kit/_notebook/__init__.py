"""Notebook support: the IPython extension (``%load_ext raytrace_kit``)."""
