"""The RL starting policy (``start_policy.prepare_start_policy``): the model loaded
(``train.model_loading``) or the embedded tiny model bootstrapped (``model_bootstrap``,
``tokenizer_bootstrap``), the skill texts checked and added to its tokenizer corpus
(``skill_texts``), the SFT warm start on expert demonstrations (``sft``)."""
