"""Reading what the kit wrote: sessions, calls, reports, explanations, timelines, profiles.

Never imported by worker-side or output modules.
"""
