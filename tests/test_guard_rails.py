"""Guard rails that say what they did: text in another encoding refused naming it (real Korean and Japanese text,
encoded by Python's codecs), a warm-up as long as the run refused, a CPU run left at the pod recipe's batch and
steps refused, and the library calls leave the process's global random generators as they found them."""
import random

import numpy as np
import pytest

import albert_tf
import finetune_helpers as fh
import helpers

KOREAN = ["대한민국의 수도는 서울이며 가장 큰 도시이다.", "한국어는 한글이라는 고유한 문자로 적는다.",
          "오늘은 날씨가 맑아서 공원에 산책을 나갔다.", "도서관에서 역사책을 빌려 주말 내내 읽었다."]
JAPANESE = ["日本の首都は東京で、人口がもっとも多い都市です。", "がぎぐげご、ざじずぜぞ、ばびぶべぼ、ぱぴぷぺぽ。",
            "今日は天気が良いので、公園へ散歩に行きました。", "図書館で歴史の本を借りて、週末にずっと読んでいました。"]


def _write(path, sentences, encoding, copies=20):
    """`sentences` as documents (a blank line between each two), repeated `copies` times, in `encoding`."""
    text = "\n\n".join("\n".join(sentences) for _ in range(copies)) + "\n"
    path.write_bytes(text.encode(encoding))
    return str(path)


@pytest.mark.parametrize("sentences, encoding, named", [(KOREAN, "euc-kr", "euc-kr"),
                                                        (JAPANESE, "shift_jis", "shift_jis")])
def test_text_in_another_encoding_is_refused_naming_it(tmp_path, tiny_spm_model, sentences, encoding, named):
    """Before: replaced byte by byte with U+FFFD (42% of an EUC-KR file) and trained on, with only a warning."""
    path = _write(tmp_path / f"{encoding}.txt", sentences, encoding)
    expected = rf"{path} is not UTF-8 text \(\d+% of its first [\d,]+ bytes are invalid UTF-8\); it decodes as " \
               rf"{named}: convert it to UTF-8 first \(e.g. iconv -f {named.upper()} -t UTF-8 {path} > {path}.utf8\)"
    with pytest.raises(ValueError, match=expected):
        albert_tf.vocab(albert_tf.VocabConfig(input=path, output_prefix=str(tmp_path / "v" / "spm")))
    with pytest.raises(ValueError, match=expected):
        albert_tf.create_data(albert_tf.CreateDataConfig(input=path, spm_model=tiny_spm_model,
                                                         output=str(tmp_path / "d" / "train")))
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{encoding}.txt"]
    # the same sentences in UTF-8 are read as they are
    utf8 = _write(tmp_path / "utf8.txt", sentences, "utf-8")
    result = albert_tf.vocab(albert_tf.VocabConfig(input=utf8, output_prefix=str(tmp_path / "v" / "spm"),
                                                   vocab_size="auto"))
    assert result.stats["replaced_bytes"] == 0 and result.vocab_size > 60


def test_a_warm_up_as_long_as_the_run_is_refused(pretrain_data, tmp_path):
    """Before: accepted; the learning rate was still rising when the run ended. Now refused when the config is
    made (before any run)."""
    with pytest.raises(ValueError, match=r"^--num-warmup-steps 10 is not less than --num-train-steps 10: the learning "
                                         r"rate would still be warming up when the run ends"):
        helpers.pretrain_config(pretrain_data, tmp_path / "m", steps=10, num_warmup_steps=10)
    assert not (tmp_path / "m").exists()


def test_a_cpu_run_at_the_pod_recipes_batch_and_steps_is_refused(pretrain_data, tmp_path, cli):
    """Before: 4096 x 125,000 steps started on a CPU without a word (an ETA of 11-19 days)."""
    args = helpers.pretrain_args(pretrain_data, tmp_path / "m")
    for flag in ("--batch-size", "--num-train-steps", "--num-warmup-steps"):
        del args[args.index(flag):args.index(flag) + 2]
    code, out, err = cli("pretrain", *args)
    assert code == 2 and out == ""
    assert err.splitlines() == [
        "albert-tf pretrain: error: --batch-size 4096 and --num-train-steps 125,000 are the pod recipe's defaults "
        "(weeks of training on a CPU); give both for this machine, e.g. --batch-size 32 --num-train-steps 2000 "
        "--num-warmup-steps 200 (`albert-tf plan --config CONFIG --topology cpu` says how long they take here and "
        "prints a run of about an hour that fits)"]
    assert not (tmp_path / "m").exists()


# ---------------------------------------------------------------------------------------------- global generators
@pytest.mark.slow
def test_library_calls_leave_the_global_random_generators_as_they_found_them(pretrain_data, tiny_spm_model,
                                                                             tmp_path):
    """Before: pretrain() and finetune() reseeded Python's, NumPy's and TensorFlow's global generators with their
    --seed (keras.utils.set_random_seed): a notebook's later draws were the run's seed's."""
    from tensorflow.python.eager import context  # pylint: disable=import-outside-toplevel

    corpus = helpers.write_corpus(str(tmp_path / "corpus.txt"))
    init = fh.save_random_init(str(tmp_path / "init"), tiny_spm_model)
    sst2 = fh.write_sst2(str(tmp_path / "sst2"), 32, 8)
    calls = [
        lambda: albert_tf.vocab(albert_tf.VocabConfig(input=corpus, output_prefix=str(tmp_path / "spm"),
                                                      vocab_size=120, seed=3)),
        lambda: albert_tf.create_data(albert_tf.CreateDataConfig(input=corpus, spm_model=tiny_spm_model,
                                                                 output=str(tmp_path / "data" / "train"),
                                                                 max_seq_length=32, seed=3)),
        lambda: albert_tf.pretrain(helpers.pretrain_config(pretrain_data, tmp_path / "model", steps=2, seed=3)),
        lambda: albert_tf.finetune(albert_tf.FinetuneConfig(task="sst2", data_dir=sst2, init=init,
                                                            output=str(tmp_path / "ft"), epochs=1, batch_size=8,
                                                            max_seq_length=16, seed=3)),
    ]
    for call in calls:
        random.seed(2024)
        np.random.seed(2024)
        seed_before = context.global_seed()
        python, numpy = random.getstate(), np.random.get_state()
        assert call().exit_code == 0
        assert random.getstate() == python
        after = np.random.get_state()
        assert after[0] == numpy[0] and np.array_equal(after[1], numpy[1]) and after[2:] == numpy[2:]
        assert context.global_seed() == seed_before
