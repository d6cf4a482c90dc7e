"""crashlab bisect: which commit brought a crash, judged step by step with replay's signature
oracle (the same crash is bad, no crash is good, another crash is a skip, never blamed)."""
