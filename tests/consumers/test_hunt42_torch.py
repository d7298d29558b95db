"""transformers code nobody here ran, unchanged on the lazy device against eager
CPU (issue 39, hunt 42): cases_hunt42.py lists the loops (7 causal LMs no
earlier hunt trained: Llama 4's text model, Hunyuan MoE, ERNIE 4.5 MoE,
Ministral, MiniMax-M2, GLM-4 MoE, LongCat-Flash), each trained as
transformers' no-Trainer examples do. The comparison is hunt 27's (losses,
state, fallbacks, compiles after the 2 warm-up steps, programs a step);
``python tests/consumers/cases_hunt42.py [names]`` prints the table.

Found: all seven train as eager does (losses and state within 2.3e-7, no
fallback). Six run one program a step and compile nothing after the second.
LongCat-Flash's experts loop in Python over the experts a step's tokens hit
(``expert_mask.sum(...).nonzero()``, then ``int(expert_idx_tensor.item())``
and ``torch.where`` per expert, modeling_longcat_flash.py:187-190): the
read cuts each step in two programs, and the tokens each expert takes are a
data-dependent count in the second program's shapes, so it compiles every
step (compiles [2, 1, 1, 1]): a strict xfail until counts that vary inside a
step's loop are handed out as valid regions (note 66's counts.py path).

CI runs none of them (its 40 minutes); ``LAZYCORE_TEST_FULL=1`` runs them all
(30-110 s each).
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(__file__))

import cases_hunt42 as cases  # noqa: E402
from cases_hunt27 import case_params, check_outcome  # noqa: E402
from _bits import MODEL_RUN  # noqa: E402 (tests/ is on the path)

_KNOWN = {
    "longcatflash_causal_lm": "a compile a step: its experts' Python loop reads which experts the tokens hit, "
                              "and each expert's token count is in the next program's shapes",
}


@MODEL_RUN
@pytest.mark.parametrize("name", case_params(cases.CASES, _KNOWN))
def test_loop_trains_as_eager(name):
    check_outcome(cases.compare(name), {}, cases.WARMUP)
