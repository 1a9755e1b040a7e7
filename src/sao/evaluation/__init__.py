"""Held-out evaluation: running a policy on held-out tasks (`held_out`, `sao eval`) and the
statistics of its scores (`stats`)."""
