"""sao: Single-Rollout Asynchronous Optimization for agentic RL.

One trajectory per prompt, trained the moment it completes; DIS off-policy correction on the
engine's own log-probs; a faster, frozen-attention value model with skip-observation GAE.
"""

__version__ = "0.1.0"
