"""`agreement`: subject-verb agreement minimal pairs from templates (BLiMP-like), built in, no download.

Each item is a subject ("The king", "The ladies near the soldier") and two continuations that differ
only in the verb's number; the grammatical one is right. Half the subjects carry an attractor, a noun
of the other number between subject and verb, which makes the task harder than the nearest noun.
The words are common in the embedded Shakespeare corpus, so a model trained there can be probed.
"""

from __future__ import annotations

import random

from rltok.downstream.tasks import Item

NOUNS = [
    ("king", "kings"),
    ("lady", "ladies"),
    ("soldier", "soldiers"),
    ("servant", "servants"),
    ("friend", "friends"),
    ("child", "children"),
    ("man", "men"),
    ("woman", "women"),
    ("lord", "lords"),
    ("daughter", "daughters"),
]
VERBS = [
    ("is", "are", "here."),
    ("was", "were", "at the gate."),
    ("has", "have", "a letter."),
    ("speaks", "speak", "of war."),
    ("comes", "come", "to court."),
    ("knows", "know", "the truth."),
    ("loves", "love", "the queen."),
    ("sleeps", "sleep", "within."),
]
PREPOSITIONS = ["of", "near", "with", "behind"]


def agreement_items(seed: int = 0) -> list[Item]:
    """All 320 items (10 nouns x 2 numbers x 8 verbs x with and without an attractor), options shuffled."""
    rng = random.Random(seed)
    items = []
    for noun in NOUNS:
        for plural in (0, 1):
            for singular_verb, plural_verb, rest in VERBS:
                for attracted in (False, True):
                    subject = f"The {noun[plural]}"
                    if attracted:
                        other = rng.choice([n for n in NOUNS if n != noun])[1 - plural]
                        subject += f" {rng.choice(PREPOSITIONS)} the {other}"
                    right, wrong = (
                        (plural_verb, singular_verb) if plural else (singular_verb, plural_verb)
                    )
                    options = [f" {right} {rest}", f" {wrong} {rest}"]
                    answer = rng.randrange(2)
                    if answer:
                        options.reverse()
                    items.append(Item(tuple((subject, option) for option in options), answer))
    return items
