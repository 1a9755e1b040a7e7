"""Peak resident memory by phase (`sao.plumbing.memory`): a phase is credited with what was
resident inside it, a nested phase is taken out of the one around it, and the whole peak
keeps every phase's."""

from __future__ import annotations

from sao.plumbing.memory import PhasePeaks, resident_gb

_MIB = 2**20


def _hold(mib: int) -> bytes:
    return b"\x01" * (mib * _MIB)  # filled, so every page is resident


def test_a_nested_phase_is_taken_out_of_its_parent_and_the_whole_peak_keeps_it():
    peaks = PhasePeaks()
    before = resident_gb()
    assert before is not None and before > 0
    with peaks.phase("outer"):
        small = _hold(16)
        with peaks.phase("inner"):
            big = _hold(400)
            del big
        del small
    phases = peaks.by_phase()
    assert peaks.peak_gb() >= before + 0.35  # the inner phase's 400 MiB, whatever the kernel
    if not phases:
        return  # the high-water mark cannot be reset here: phases are not told apart
    assert set(phases) == {"outer", "inner"}
    assert phases["inner"] >= before + 0.35
    # The outer phase never held the 400 MiB itself.
    assert phases["outer"] < phases["inner"] - 0.3
    assert peaks.peak_gb() >= phases["inner"]


def test_a_phase_entered_again_keeps_its_highest_peak():
    peaks = PhasePeaks()
    with peaks.phase("evals"):
        held = _hold(300)
        del held
    with peaks.phase("evals"):
        pass
    with peaks.phase("training"):
        pass
    assert peaks.peak_gb() > 0.29
    phases = peaks.by_phase()
    if phases:
        assert phases["evals"] > phases["training"] + 0.25
