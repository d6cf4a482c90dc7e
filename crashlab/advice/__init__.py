"""What to do next about a crash: drain its GPU, apply a known workaround, restart, or stop.

crashlab.advice.decide weighs the evidence (plain records, so serve, the index and a lone dump
each give what they know); crashlab.advice.evidence reads that evidence from the published
reports.
"""
