"""Reading what the kit wrote: events and profiles (later: sessions, reports, timelines).

Never imported by worker-side or output modules.
"""
