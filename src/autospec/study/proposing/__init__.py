"""What a study launches next: the queue policy (``queue``), feasible-only proposals from
a scratch study (``proposer``) over the space SGLang accepts (``compiled``), the samplers
(``samplers``: the model sampler and Optuna's), mem-fraction pushes (``mem_push``)."""
