"""Credit methods of the seed papers beyond the span judge (docs/auditing.md
"Model-internal credit"), all on the probe's LM scorer:

* `value` - ``judge: "value:<model>"``: RREDCoT-style value differences as spans;
* `reweight` - ``reweight: "cscr:<model>" | "cort:<model>"``: w[t] multiplying A_i;
* `pow3r` - policy-aware criterion weights for rubric rewards (``/v1/rubric/weights``).

`models` holds the allow-list and the per-process model cache; `rescoring` the
batched counterfactual-prefix pass. Modules that need torch import it inside
functions, so the service runs without the ``probe`` extra until a method is asked for.
"""
