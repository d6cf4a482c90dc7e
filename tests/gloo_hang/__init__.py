"""A real hang across ranks for the hang reading's tests: torch.distributed with the gloo backend
on this machine's CPU, run by the real SGLang environment's Python (its torch 2.14.1)."""
