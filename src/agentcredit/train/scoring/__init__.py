"""Every model forward that scores tokens, and the record it takes: the one tree forward every
pass runs, training or not (``tree_forward``, over ``Rows``), the LM head's log-probs and
entropies (``logprobs``), which passes each update makes and why (``passes``), the behaviour
and reference pass over the step rows (``behaviour_pass``), the ADRS teacher pass with the
skill in the prompt (``teacher``), HCAPO's hindsight pass with the final observation in the
prompt (``hindsight_pass``), and VICT's verifier traces (``verifier_traces``, no forward)."""
