"""``crashlab report``: an upstream issue from everything crashlab knows of a crash.

One Markdown body laid out like SGLang's bug template (what happened, reproduction,
environment, triage, logs), and one attachment beside it: a .tar.gz under a size budget with the
reports, the environment, log excerpts, each coredump's triage and, where they fit, the dumps
and the request pickle. Redaction is on throughout; ``--anonymize`` also takes out hosts, users,
addresses and the requests' contents.
"""
