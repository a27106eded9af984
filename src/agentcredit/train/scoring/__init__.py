"""The scoring passes over a sampled batch besides the update's own: the one tree forward every
pass runs (``tree_forward``), the LM head's log-probs and entropies (``logprobs``), which passes
each update makes and why (``passes``), the ADRS teacher pass with the skill in the prompt
(``teacher``), HCAPO's hindsight pass with the final observation in the prompt
(``hindsight_pass``), and VICT's verifier traces (``verifier_traces``)."""
