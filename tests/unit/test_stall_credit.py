"""How token GAE's lambda splits the credit between submitting and stalling (code_repair shape).

A 3-turn toy with code_repair's character-level action lengths (`<tool>submit</tool>` is 8
tokens, `<tool>test</tool>` 6, a one-line `replace` about 30). From the same state after a
first `replace`, the policy either submits (passes with probability 0.1, else reward 0) or stalls:
`test`, then a `replace` on the last turn, which runs out of turns with reward 0. Submitting is
truly better by 0.1. The critic predicts the batch's mean return, 0.2, everywhere.

The "decision token" is the first token of the turn-2 action: the one whose choice (submit or
not) the advantage credits. Every advantage here is `(R - c) * lambda ** k`, with `k` the action
tokens after it, because a constant critic makes every TD error 0 except the last one.
"""

import pytest
import torch

from sao.core.advantages import adaptive_lambda, token_gae

MEAN_VALUE = 0.2
PASS_RATE = 0.1
PROMPT, OBS, REPLACE, TEST, SUBMIT = 2, 2, 30, 6, 8


def _mask(segments: list[tuple[int, int]], width: int) -> list[float]:
    row = [float(is_action) for is_action, n in segments for _ in range(n)]
    return row + [0.0] * (width - len(row))


SUBMIT_ROW = [(0, PROMPT), (1, REPLACE), (0, OBS), (1, SUBMIT)]
STALL_ROW = [(0, PROMPT), (1, REPLACE), (0, OBS), (1, TEST), (0, OBS), (1, REPLACE)]
WIDTH = sum(n for _, n in STALL_ROW)
DECISION = PROMPT + REPLACE + OBS  # first token of the turn-2 action, in both rows
LAST_REPLACE = WIDTH - REPLACE  # first token of the stalling row's final action


def _toy(values: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
    """Rows: submit that passes, submit that fails, stall. Rewards on the last action token."""
    mask = torch.tensor([_mask(SUBMIT_ROW, WIDTH)] * 2 + [_mask(STALL_ROW, WIDTH)])
    rewards = torch.zeros_like(mask)
    submit_end = sum(n for _, n in SUBMIT_ROW) - 1
    rewards[0, submit_end] = 1.0  # the passing submit; the other two rows end with 0
    if values is None:
        values = torch.full_like(mask, MEAN_VALUE)
    return rewards, values, mask


def _decision_advantages(lam: float | torch.Tensor, values: torch.Tensor | None = None):
    """`(E[A | submit], E[A | stall])` at the decision token, and the advantage tensor."""
    rewards, values, mask = _toy(values)
    adv, _ = token_gae(rewards, values, mask, gamma=1.0, lam=lam)
    submit = PASS_RATE * adv[0, DECISION] + (1 - PASS_RATE) * adv[1, DECISION]
    return float(submit), float(adv[2, DECISION]), adv


def test_lambda_095_with_a_mean_critic_favours_stalling_over_a_better_submit():
    submit, stall, adv = _decision_advantages(0.95)
    # Submit: 7 action tokens follow the decision token; stall: 5 (test) + 30 (replace).
    assert float(adv[1, DECISION]) == pytest.approx(-0.2 * 0.95**7, rel=1e-5)  # -0.13967
    assert float(adv[0, DECISION]) == pytest.approx(0.8 * 0.95**7, rel=1e-5)  # +0.55867
    assert submit == pytest.approx((PASS_RATE - MEAN_VALUE) * 0.95**7, rel=1e-5)  # -0.06983
    assert stall == pytest.approx(-0.2 * 0.95**35, rel=1e-5)  # -0.03322
    # The truly better action (submit, +0.1) gets the more negative expected advantage.
    assert submit < stall
    # Running out of turns is charged to the last action, whose command token (the first of a
    # 30-token replace) sees 0.95**29 of it, and to the turn-1 edit almost not at all.
    assert float(adv[2, LAST_REPLACE]) == pytest.approx(-0.2 * 0.95**29, rel=1e-5)  # -0.04519
    assert float(adv[2, PROMPT]) == pytest.approx(-0.2 * 0.95**65, rel=1e-5)  # -0.00713
    # A failing submit's command token, by contrast, carries 0.95**7 = 70% of the whole -0.2.
    assert float(adv[1, DECISION]) / float(adv[2, LAST_REPLACE]) == pytest.approx(
        0.95**-22, rel=1e-5
    )  # 3.09 times as negative


def test_monte_carlo_advantages_rank_submit_above_stalling_by_the_true_gap():
    submit, stall, _ = _decision_advantages(1.0)
    assert submit == pytest.approx(PASS_RATE - MEAN_VALUE, rel=1e-5)  # -0.1
    assert stall == pytest.approx(-MEAN_VALUE, rel=1e-5)  # -0.2
    assert submit - stall == pytest.approx(PASS_RATE, rel=1e-5)


def test_length_adaptive_lambda_restores_the_order_but_shrinks_the_gap():
    _, _, mask = _toy()
    lam = adaptive_lambda(mask.sum(dim=1), alpha=1.5)
    # L = 38 for the submit rows, 66 for the stall row: 1 - 1/57 and 1 - 1/99.
    assert lam.tolist() == pytest.approx([1 - 1 / 57, 1 - 1 / 57, 1 - 1 / 99], rel=1e-6)
    submit, stall, _ = _decision_advantages(lam)
    assert submit == pytest.approx(-0.1 * (1 - 1 / 57) ** 7, rel=1e-5)  # -0.08835
    assert stall == pytest.approx(-0.2 * (1 - 1 / 99) ** 35, rel=1e-5)  # -0.14019
    assert submit - stall == pytest.approx(0.05184, abs=1e-4)  # the true gap is 0.1


@pytest.mark.parametrize("lam", [0.5, 0.95, 1.0])
def test_a_critic_that_knows_each_state_value_makes_lambda_irrelevant(lam):
    # V(decision state) = 0.2 as before, but after the decision the critic knows what follows:
    # a submit passes with 0.1, stalling ends in 0. The bias above is the critic's error.
    _, values, mask = _toy()
    values[:2, DECISION + 1 :] = PASS_RATE
    values[2, DECISION + 1 :] = 0.0
    submit, stall, _ = _decision_advantages(lam, values)
    assert submit == pytest.approx(PASS_RATE - MEAN_VALUE, abs=1e-6)
    assert stall == pytest.approx(-MEAN_VALUE, abs=1e-6)


def _last_turn_advantages(lam: float, unsubmitted: float) -> tuple[float, float]:
    """At the last turn after a failed test: the command token's advantage for a failing
    `submit` (reward 0) and for a last `replace` that runs out of turns (reward 0 plus the
    action reward `unsubmitted`), under the mean critic."""
    rows = [[(0, OBS), (1, SUBMIT)], [(0, OBS), (1, REPLACE)]]
    width = OBS + REPLACE
    mask = torch.tensor([_mask(row, width) for row in rows])
    rewards = torch.zeros_like(mask)
    rewards[1, width - 1] = unsubmitted
    values = torch.full_like(mask, MEAN_VALUE)
    adv, _ = token_gae(rewards, values, mask, gamma=1.0, lam=lam)
    return float(adv[0, OBS]), float(adv[1, OBS])


def test_an_unsubmitted_reward_reaches_a_long_last_edit_through_lambda():
    # code_repair's `unsubmitted_reward` lands on the last edit's last token: under lambda 0.95
    # its command token sees 0.95**29 of it, against 0.95**7 of a failing submit's 0 - c, so the
    # edit still looks better unless the reward is below -(0.95**-22 - 1) c = -2.09 c.
    submit, edit = _last_turn_advantages(0.95, -0.1)
    assert submit == pytest.approx(-MEAN_VALUE * 0.95**7, rel=1e-5)  # -0.13967
    assert edit == pytest.approx(-0.3 * 0.95**29, rel=1e-5)  # -0.06778
    assert edit > submit
    threshold = MEAN_VALUE * (0.95**-22 - 1)  # 0.418
    assert _last_turn_advantages(0.95, -threshold + 0.01)[1] > submit
    assert _last_turn_advantages(0.95, -threshold - 0.01)[1] < submit
    # Monte-Carlo advantages charge the whole reward to every token: any cost ranks the submit
    # first.
    submit, edit = _last_turn_advantages(1.0, -0.1)
    assert (submit, edit) == (pytest.approx(-MEAN_VALUE), pytest.approx(-0.3))
