"""Rollouts: the policy protocol, prompts, action parsing, the multi-turn collector and its
records."""
