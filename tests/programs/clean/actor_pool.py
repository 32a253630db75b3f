"""An ActorPool: two encoders build their vocabulary once, then share 30 batches of text."""

from __future__ import annotations

import ray
from ray.util import ActorPool

VOCABULARY = 50_000
BATCHES = 30
WORDS_PER_BATCH = 6_000


@ray.remote
class Encoder:
    """Turns words into ids, with a vocabulary built once, in ``__init__``."""

    def __init__(self, size: int) -> None:
        self.ids = {f"w{index}": index for index in range(size)}

    def encode(self, words: list[str]) -> int:
        """The batch's checksum: each word's id and its character trigrams' hashes."""
        unknown = len(self.ids)
        total = 0
        for word in words:
            total += self.ids.get(word, unknown)
            for start in range(len(word) - 2):
                total = (total * 31 + hash(word[start : start + 3]) % 9973) % 1_000_003
        return total


def batch(number: int) -> list[str]:
    """A batch of words, some unknown to the vocabulary."""
    return [
        f"w{(number * 7919 + k * 104_729) % (VOCABULARY + 500)}{'x' * (k % 7)}"
        for k in range(WORDS_PER_BATCH)
    ]


def main() -> None:
    ray.init(num_cpus=2)
    pool = ActorPool([Encoder.remote(VOCABULARY) for _ in range(2)])
    sums = list(pool.map(lambda actor, number: actor.encode.remote(batch(number)), range(BATCHES)))
    print(f"{len(sums)} batches encoded, checksum {sum(sums) % 1_000_003}")
    ray.shutdown()


if __name__ == "__main__":
    main()
