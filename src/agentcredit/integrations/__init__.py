"""Integrations with external training engines (docs/design.md, "integrations/verl/").

Nothing here is imported by ``agentcredit`` itself: each integration is an optional
extra whose engine is imported only by the modules that need it.
"""
