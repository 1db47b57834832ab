"""The Edit page's tokens-per-letter note applies only to prompts that are mostly Cyrillic letters."""

from kvviz.experiments.edit.rules import MIN_NOTE_LETTERS, cyrillic_note_applies


def test_russian_prose_gets_the_note():
    assert cyrillic_note_applies("Кот сидит на окне и ждёт, когда хозяйка принесёт ему рыбу.")


def test_emoji_digits_english_and_a_few_letters_do_not():
    assert not cyrillic_note_applies("🙂🎉🚀🔥 кот 🐱🐈😺😸😹 рыба 🐟🐠🐡🦈 " * 3)  # 21 letters, mostly emoji
    assert not cyrillic_note_applies("Кот" + " 12345" * 10)
    assert not cyrillic_note_applies("The cat sat on the mat and looked at the rain falling on the street.")
    assert not cyrillic_note_applies("я" * (MIN_NOTE_LETTERS - 1))
    assert cyrillic_note_applies("я" * MIN_NOTE_LETTERS)
