"""Helpers for the fine-tuning tests: generated tasks in the official file formats, and a tiny pretrained-model
directory. Everything is generated from a seed; nothing is downloaded."""
import json
import os
import random

import helpers


# The generated two-class task: a sentence of filler words with one cue word inserted; the cue's set is the label.
CUES = (("river", "mountain", "garden", "water", "winter"), ("computer", "program", "number", "system", "theory"))
FILLER = tuple(w for w in helpers._WORDS if w.isalpha() and w not in CUES[0] + CUES[1])  # pylint: disable=protected-access


def cue_sentence(rng, label, min_words=4, max_words=10):
    words = [rng.choice(FILLER) for _ in range(rng.randint(min_words, max_words))]
    words.insert(rng.randint(0, len(words)), rng.choice(CUES[label]))
    return " ".join(words).capitalize() + "."


def write_sst2(directory, num_train=320, num_dev=96, seed=0):
    """SST-2's layout (header "sentence<TAB>label") holding the generated cue-word task. Returns the directory."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for split, n in (("train", num_train), ("dev", num_dev)):
        with open(os.path.join(directory, f"{split}.tsv"), "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n")
            for i in range(n):
                label = i % 2 if split == "dev" else rng.randint(0, 1)
                f.write(f"{cue_sentence(rng, label)}\t{label}\n")
    return directory


def save_random_init(directory, spm_model, seed=0, **config_changes):
    """A pretrained-model directory holding a randomly initialized tiny model (vocab = the spm's size)."""
    import keras  # pylint: disable=import-outside-toplevel

    from albert_tf import AlbertConfig, AlbertPretrainer, configs_dir  # pylint: disable=import-outside-toplevel
    from albert_tf.text import AlbertTokenizer  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(seed)
    changes = {"vocab_size": AlbertTokenizer(spm_model).vocab_size, **config_changes}
    config = AlbertConfig.from_json_file(os.path.join(configs_dir(), "albert_tiny.json")).replace(**changes)
    AlbertPretrainer(config).save_pretrained(directory, spm_model=spm_model)
    return directory


# The generated QA tasks: a passage of filler sentences holding one answer word (one of the cue words); the
# question asks for it. SQuAD v2 adds passages without one (unanswerable).
ANSWER_WORDS = CUES[0] + CUES[1]
QUESTION = "Which word of the list is in the text?"


def _passage(rng, answer, sentences=3):
    """(text, character offset of `answer` in it, or -1). Filler sentences; `answer` (if any) in one of them."""
    parts = [" ".join(rng.choice(FILLER) for _ in range(rng.randint(3, 7))) for _ in range(sentences)]
    if answer is None:
        return " ".join(p.capitalize() + "." for p in parts), -1
    where = rng.randrange(sentences)
    words = parts[where].split()
    position = rng.randint(1, len(words))  # never first: the answer keeps its lower-case spelling
    words.insert(position, answer)
    parts[where] = " ".join(words)
    text = " ".join(p.capitalize() + "." for p in parts)
    offset = len(" ".join(p.capitalize() + "." for p in parts[:where])) + (1 if where else 0)
    offset += len(" ".join(words[:position])) + 1
    assert text[offset:offset + len(answer)] == answer
    return text, offset


def write_squad_answer_words(directory, version="1.1", num_train=384, num_dev=96, seed=0):
    """train-vX.json and dev-vX.json (SQuAD's layout and file names) of the generated answer-word task. v2.0: every
    third question has no answer (is_impossible). Returns the directory."""

    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    for split, n in (("train", num_train), ("dev", num_dev)):
        paragraphs = []
        for i in range(n):
            impossible = version == "2.0" and i % 3 == 2
            answer = None if impossible else rng.choice(ANSWER_WORDS)
            context, offset = _passage(rng, answer)
            qa = {"id": f"{split}-{i}", "question": QUESTION,
                  "answers": [] if impossible else [{"text": answer, "answer_start": offset}]}
            if version == "2.0":
                qa["is_impossible"] = impossible
            paragraphs.append({"context": context, "qas": [qa]})
        data = {"version": version, "data": [{"title": f"Generated {split}", "paragraphs": paragraphs}]}
        with open(os.path.join(directory, f"{split}-v{version}.json"), "w", encoding="utf-8") as f:
            json.dump(data, f)
    return directory


def write_race_answer_words(directory, num_files=48, num_dev_files=16, questions_per_file=2, seed=0):
    """RACE's layout (train|dev|test/{middle,high}/N.txt, one JSON object a file) of the generated answer-word
    task: the article holds one answer word per question, the right option is that word, the three others are
    answer words absent from the article. Files alternate between middle and high. Returns the directory."""

    rng = random.Random(seed)
    for split, n in (("train", num_files), ("dev", num_dev_files), ("test", num_dev_files)):
        for i in range(n):
            level = ("middle", "high")[i % 2]
            answers = rng.sample(ANSWER_WORDS, questions_per_file)
            article = " ".join(_passage(rng, word)[0] for word in answers)
            absent = [w for w in ANSWER_WORDS if w not in answers]
            options, letters = [], []
            for word in answers:
                choice = rng.sample(absent, 3)
                label = rng.randrange(4)
                choice.insert(label, word)
                options.append(choice)
                letters.append("ABCD"[label])
            folder = os.path.join(directory, split, level)
            os.makedirs(folder, exist_ok=True)
            with open(os.path.join(folder, f"{i}.txt"), "w", encoding="utf-8") as f:
                json.dump({"id": f"{level}{i}.txt", "article": article,
                           "questions": ["Which of these words is in the passage?"] * questions_per_file,
                           "options": options, "answers": letters}, f)
    return directory
