"""SFT batches grouped by length: full batches, uniform coverage, and far less padding."""

import random
from collections import Counter
from itertools import islice

import pytest

from sao.warmstart import length_grouped_batches


def _padded_tokens(batches: list[list[int]], lengths: list[int]) -> int:
    return sum(len(b) * max(lengths[i] for i in b) for b in batches)


def test_batches_are_full_and_cover_rows_evenly():
    lengths = [random.Random(i).randint(10, 500) for i in range(100)]
    batches = list(islice(length_grouped_batches(lengths, 8, random.Random(0), group=4), 2000))
    assert all(len(b) == 8 and len(set(b)) == 8 for b in batches)
    counts = Counter(i for b in batches for i in b)
    assert set(counts) == set(range(100))
    # 16,000 draws over 100 rows: each near 160, none starved or favoured.
    assert min(counts.values()) > 100 and max(counts.values()) < 220


def test_grouping_cuts_padding_against_random_batches():
    rng = random.Random(1)
    lengths = [rng.randint(250, 850) for _ in range(2000)]
    grouped = list(islice(length_grouped_batches(lengths, 32, random.Random(2)), 200))
    shuffled = [random.Random(3 + k).sample(range(2000), 32) for k in range(200)]
    assert _padded_tokens(grouped, lengths) < 0.75 * _padded_tokens(shuffled, lengths)


def test_fewer_rows_than_a_batch_gives_batches_of_all_rows():
    batches = list(islice(length_grouped_batches([5, 3, 9], 8, random.Random(0)), 3))
    assert all(sorted(b) == [0, 1, 2] for b in batches)


def test_no_rows_is_an_error():
    with pytest.raises(ValueError, match="need rows"):
        next(length_grouped_batches([], 8, random.Random(0)))
