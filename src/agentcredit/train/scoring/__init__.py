"""The scoring passes over a sampled batch besides the update's own: which of them each update
makes and why (``passes``), token log-probs (``logprobs``), the ADRS teacher pass with the skill
in the prompt (``teacher``), HCAPO's hindsight pass with the final observation in the prompt
(``hindsight_pass``), and VICT's verifier traces (``verifier_traces``)."""
