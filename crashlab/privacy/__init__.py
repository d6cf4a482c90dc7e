"""What crashlab does to text before it leaves the machine: secrets masked (redact.py), and for a
public tracker hosts, users and addresses replaced (anonymize.py); policy.py applies both in order.
"""
