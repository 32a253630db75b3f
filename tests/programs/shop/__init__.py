"""A small shop pipeline of undecorated Ray remotes, for ``raytrace-kit run`` tests."""
