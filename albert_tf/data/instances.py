"""Building pretraining instances from text blocks: shared by the local `create-data` and the Beam pipeline.

Nothing here imports TensorFlow, so worker processes stay light. The unit of work is a *block*: up to
`BLOCK_DOCUMENTS` consecutive documents of one input file (fewer once they pass `BLOCK_BYTES` of text); its
instances are assembled, masked and serialized `BATCH_INSTANCES` at a time. Block boundaries depend only on
the input, and every random choice is seeded from (seed, file index, document index, dupe round) or (seed, file
index, block index), so the records of a block are the same bytes whoever processes it.

Instances follow google-research/albert's create_pretraining_data.py (SOP):
  * per document and dupe round a target length: max_seq_length − 3, or with p = short_seq_prob a uniform
    integer in [2, max_seq_length − 3] (drawn once per document, as the original);
  * consecutive sentences are gathered into a chunk until it reaches the target (or the document ends); a split
    point a_end is uniform in [1, len(chunk) − 1]; with p = 0.5 A and B are swapped (label 1), else label 0;
  * a one-sentence chunk takes B from a random other document (from a random sentence on, until B reaches the
    remaining target) with label 1 — the original's fallback;
  * the longer side is truncated one token at a time, from the front or the back with p = 0.5 each, until the pair
    fits in max_seq_length − 3 (sampled here in closed form: the same distribution, no per-token loop);
  * [CLS] A [SEP] B [SEP], segment 0 through the first [SEP], token_boundary from `masking.word_start_table`
    (1 at [CLS]/[SEP]); n-gram whole-word masking from `albert_tf.data.masking`.

Deliberate differences, so that memory stays bounded and the output is deterministic in streaming:
  * the original shuffles all documents and all instances of the corpus in memory; here instances are shuffled
    within a block and dealt round-robin to the shards (the input pipeline shuffles files and records anyway);
  * the fallback's "random other document" is drawn from the same block (up to 256 documents), not the corpus;
  * documents with fewer than two sentences are skipped (counted, their bytes and the files that made nothing
    reported): they cannot make a sentence-order pair, and the original would only pair them with a random document
    under label 1;
  * a line longer than LONG_LINE bytes is cut into sentences as `vocab` cuts it (`iter_blocks`), where the original
    takes it as one sentence (and truncates it);
  * the original draws n-gram sizes from numpy's unseeded global generator; here everything is seeded.
"""
import dataclasses
import functools
import itertools
import random

import numpy as np

from albert_tf import run_config
from albert_tf.data import masking
from albert_tf.data.corpus import decode_utf8, split_long_line
from albert_tf.settings.create_data_config import CreateDataConfig
from albert_tf.settings.create_data_config import instance_range_problem
from albert_tf.settings.vocab_config import LINE_LIMIT as LONG_LINE  # vocab's: lines it cuts into sentences
from albert_tf.text import CLS_ID, PAD_ID, SEP_ID

BLOCK_DOCUMENTS = 256
BLOCK_BYTES = 1 << 20
BATCH_INSTANCES = 512  # instances assembled, masked and serialized together
_MIX = 1_000_003

# ------------------------------------------------------------------------------------------------ reading text


@dataclasses.dataclass
class Block:  # pylint: disable=too-many-instance-attributes
    """Up to BLOCK_DOCUMENTS documents of one file. documents[i] is a list of non-blank lines (str), sizes[i] the
    bytes of its lines as read; split_lines: lines longer than LONG_LINE cut into pieces (`iter_blocks`)."""
    file_index: int
    block_index: int
    first_document: int
    documents: list
    replaced_bytes: int = 0
    sizes: list = dataclasses.field(default_factory=list)
    split_lines: int = 0


def piece_bytes(options):
    """The longest piece (UTF-8 bytes) create-data cuts a long line into: half of --max-seq-length, so that even at
    one token a byte (text its vocabulary barely knows) a piece is at most half an instance, and a chunk holds two
    or more pieces to split into A and B; at the usual 3-4 bytes a token it holds 6-8."""
    return max(4, options.max_seq_length // 2)


def iter_blocks(lines, file_index, block_documents=BLOCK_DOCUMENTS, block_bytes=BLOCK_BYTES, piece_bytes=None):
    """Groups an iterable of raw lines (bytes) of one file into Blocks.

    The original format: one sentence per line, blank (whitespace-only) lines between documents. Invalid UTF-8 is
    replaced by U+FFFD and counted in `Block.replaced_bytes`. A line longer than LONG_LINE bytes (vocab's limit:
    a paragraph, or a whole text on one line) is cut into sentences as vocab cuts it (corpus.split_long_line), in
    pieces of at most `piece_bytes` (create-data's: `piece_bytes`), each piece a sentence of its own; None: lines
    are taken as they are.
    """
    documents, sizes, current, size, block_index, first, replaced, split = [], [], [], 0, 0, 0, 0, 0
    document_size = 0

    def flush():
        nonlocal documents, sizes, size, block_index, first, replaced, split
        block = Block(file_index, block_index, first, documents, replaced, sizes, split)
        first += len(documents)
        documents, sizes, size, replaced, split = [], [], 0, 0, 0
        block_index += 1
        return block

    for raw in itertools.chain(lines, [b""]):
        line, bad = decode_utf8(raw)
        replaced += bad
        line = line.strip()
        if line:
            # at most 4 bytes a character: a line of up to LONG_LINE / 4 characters fits without encoding it
            long = piece_bytes and 4 * len(line) > LONG_LINE
            pieces = split_long_line(line, LONG_LINE, piece_bytes) if long else [line]
            split += len(pieces) > 1
            current.extend(pieces)
            size += len(raw)
            document_size += len(raw)
            continue
        if current:  # a blank line (or the end) closes a document
            documents.append(current)
            sizes.append(document_size)
            current, document_size = [], 0
            if len(documents) >= block_documents or size >= block_bytes:
                yield flush()
    if documents or replaced:
        yield flush()


# ------------------------------------------------------------------------------------------------ instances
@dataclasses.dataclass(frozen=True)
class InstanceOptions:
    """The generation settings (the create-data flags, with their defaults)."""
    max_seq_length: int = run_config.default_for(CreateDataConfig, "max_seq_length")
    max_predictions: int = run_config.default_for(CreateDataConfig, "max_predictions")
    masked_lm_prob: float = run_config.default_for(CreateDataConfig, "masked_lm_prob")
    ngram: int = run_config.default_for(CreateDataConfig, "ngram")
    dupe_factor: int = run_config.default_for(CreateDataConfig, "dupe_factor")
    short_seq_prob: float = run_config.default_for(CreateDataConfig, "short_seq_prob")
    seed: int = run_config.default_for(CreateDataConfig, "seed")
    mask: bool = not run_config.default_for(CreateDataConfig, "no_mask")

    def validate(self):
        """Returns self, or refuses a value out of its range (settings.create_data_config.INSTANCE_RANGES)."""
        problem = instance_range_problem(self)
        if problem:
            raise ValueError(f"{problem[1]}, got {self}")
        return self


@dataclasses.dataclass
class BlockStats:
    """Counts for the closing summary (summed over blocks). text_bytes: the bytes of the documents' lines as read;
    skipped_bytes: those of the skipped documents (fewer than two sentences); split_lines: lines longer than
    LONG_LINE cut into sentences."""
    documents: int = 0
    skipped_documents: int = 0
    text_bytes: int = 0
    skipped_bytes: int = 0
    split_lines: int = 0
    instances: int = 0
    tokens: int = 0
    masked: int = 0
    maskable: int = 0
    swapped: int = 0
    random_next: int = 0
    replaced_bytes: int = 0

    def add(self, other):
        for field in dataclasses.fields(self):
            setattr(self, field.name, getattr(self, field.name) + getattr(other, field.name))
        return self


def _truncate(rnd, a0, a1, b0, b1, max_tokens):
    """Truncates [a0, a1) and [b0, b1) as the original: the longer side (B on ties) loses a token from its front
    or back (p = 0.5) until the pair fits. The per-side removals and front counts are drawn in closed form."""
    la, lb = a1 - a0, b1 - b0
    excess = la + lb - max_tokens
    if excess <= 0:
        return a0, a1, b0, b1
    gap = abs(la - lb)
    first = min(excess, gap)
    rest = excess - first
    cut_a = (first if la > lb else 0) + rest // 2
    cut_b = (first if lb > la else 0) + rest - rest // 2
    front_a = bin(rnd.getrandbits(cut_a)).count("1") if cut_a else 0
    front_b = bin(rnd.getrandbits(cut_b)).count("1") if cut_b else 0
    return a0 + front_a, a1 - (cut_a - front_a), b0 + front_b, b1 - (cut_b - front_b)


def document_instances(offsets, doc, docs, rnd, max_seq_length, short_seq_prob):
    """The SOP instances of one document in one dupe round.

    Args:
      offsets: int list; sentence s of document d spans flat tokens offsets[d][s] : offsets[d][s + 1].
      doc: index of this document in `offsets`; docs: number of documents (the fallback draws among them).
      rnd: random.Random for this (document, round).
    Returns:
      a list of (a_start, a_end, b_start, b_end, label, fallback) into the block's flat token array.
    """
    bounds = offsets[doc]
    max_tokens = max_seq_length - 3
    target = max_tokens
    if rnd.random() < short_seq_prob:
        target = rnd.randint(2, max_tokens)
    out = []
    num_sents = len(bounds) - 1
    chunk_start = 0
    for i in range(num_sents):
        if i != num_sents - 1 and bounds[i + 1] - bounds[chunk_start] < target:
            continue
        chunk_len = i + 1 - chunk_start
        fallback = chunk_len == 1
        if fallback:
            a0, a1 = bounds[chunk_start], bounds[i + 1]
            other = doc
            for _ in range(10):
                other = rnd.randint(0, docs - 1)
                if other != doc:
                    break
            rb = offsets[other]
            start = rnd.randint(0, len(rb) - 2)
            need = target - (a1 - a0)
            end = start + 1
            while end < len(rb) - 1 and rb[end] - rb[start] < need:
                end += 1
            b0, b1, label = rb[start], rb[end], 1
        else:
            split = bounds[chunk_start + rnd.randint(1, chunk_len - 1)]
            a0, a1, b0, b1 = bounds[chunk_start], split, split, bounds[i + 1]
            label = 0
            if rnd.random() < 0.5:
                a0, a1, b0, b1, label = b0, b1, a0, a1, 1
        out.append(_truncate(rnd, a0, a1, b0, b1, max_tokens) + (label, fallback))
        chunk_start = i + 1
    return out


def document_seed(seed, file_index, document_index, dupe_round):
    """The integer seeding random.Random for one document in one dupe round."""
    return ((seed * _MIX + file_index) * _MIX + document_index) * _MIX + dupe_round


def block_seed(seed, file_index, block_index):
    """The numpy seed sequence for the block-level draws (masking, shuffling)."""
    return [seed, file_index, block_index, 0x5EED]


class BlockProcessor:
    """Turns Blocks into serialized tf.train.Example records (the TFRecord features of albert_tf.data.features).

    Args:
      tokenizer: an albert_tf.AlbertTokenizer (encode, id_to_piece, vocab_size).
      options: InstanceOptions.
    """

    def __init__(self, tokenizer, options):
        self.tokenizer = tokenizer
        self.options = options.validate()
        self.vocab_size = tokenizer.vocab_size
        table = masking.word_start_table([tokenizer.id_to_piece(i) for i in range(self.vocab_size)])
        table[[CLS_ID, SEP_ID]] = True
        table[PAD_ID] = False
        self.word_start = table.astype(np.int64)

    def tokenize(self, documents):
        """documents (lists of lines) → (flat int64 token array, per-document sentence offsets; empty sentences
        dropped)."""
        lines = [line for doc in documents for line in doc]
        encoded = self.tokenizer.encode(lines) if lines else []
        lengths = np.fromiter(map(len, encoded), dtype=np.int64, count=len(encoded))
        flat = np.fromiter(itertools.chain.from_iterable(encoded), dtype=np.int64, count=int(lengths.sum()))
        ends = np.cumsum(lengths).tolist()
        offsets, k = [], 0
        for doc in documents:
            starts = [0 if k == 0 else ends[k - 1]]
            for j in range(k, k + len(doc)):
                if lengths[j]:
                    starts.append(ends[j])
            k += len(doc)
            offsets.append(starts)
        return flat, offsets

    def instances(self, block, offsets):
        """(the (a0, a1, b0, b1, label, fallback) tuples of a block, in document / round order; the indices of the
        documents skipped: fewer than two sentences)."""
        opts = self.options
        usable = [d for d, bounds in enumerate(offsets) if len(bounds) > 1]
        kept = [offsets[d] for d in usable]
        out = []
        for rank, d in enumerate(usable):
            if len(offsets[d]) < 3:  # fewer than two sentences
                continue
            for dupe_round in range(opts.dupe_factor):
                seed = document_seed(opts.seed, block.file_index, block.first_document + d, dupe_round)
                out.extend(document_instances(kept, rank, len(kept), random.Random(seed), opts.max_seq_length,
                                              opts.short_seq_prob))
        skipped = [d for d in range(len(block.documents)) if len(offsets[d]) < 3]
        return out, skipped

    def process(self, block):
        """Block → (list of serialized records, BlockStats)."""
        opts = self.options
        flat, offsets = self.tokenize(block.documents)
        spans, skipped = self.instances(block, offsets)
        stats = BlockStats(documents=len(block.documents), skipped_documents=len(skipped),
                           text_bytes=sum(block.sizes), skipped_bytes=sum(block.sizes[d] for d in skipped),
                           split_lines=block.split_lines, replaced_bytes=block.replaced_bytes)
        if not spans:
            return [], stats
        rng = np.random.default_rng(block_seed(opts.seed, block.file_index, block.block_index))
        rng.shuffle(spans)
        span = np.array([s[:5] for s in spans], dtype=np.int64)
        records = []
        for start in range(0, len(spans), BATCH_INSTANCES):  # bounded temporaries, whatever the block holds
            records.extend(self._encode(flat, span[start:start + BATCH_INSTANCES], rng, stats))
        stats.instances = len(spans)
        stats.random_next = sum(s[5] for s in spans)
        return records, stats

    def _encode(self, flat, span, rng, stats):
        """Assembles, masks and serializes a batch of instances given as (a0, a1, b0, b1, label) rows [n, 5]."""
        opts = self.options
        a0, a1, b0, b1, label = span.T
        la, lb = a1 - a0, b1 - b0
        lengths = la + lb + 3
        col = np.arange(opts.max_seq_length)[None, :]
        in_a = (col >= 1) & (col <= la[:, None])
        in_b = (col >= la[:, None] + 2) & (col < lengths[:, None] - 1)
        src = np.where(in_a, a0[:, None] + col - 1, np.where(in_b, b0[:, None] + col - la[:, None] - 2, 0))
        ids = np.where(in_a | in_b, flat[src], PAD_ID)
        ids[:, 0] = CLS_ID
        rows = np.arange(len(span))
        ids[rows, la + 1] = SEP_ID
        ids[rows, lengths - 1] = SEP_ID
        valid = col < lengths[:, None]
        segment = (valid & (col >= la[:, None] + 2)).astype(np.int64)
        boundary = self.word_start[ids] * valid
        if opts.mask:
            masked, positions, mlm_ids, num = masking.mask_instances(
                ids, lengths, boundary, rng, masked_lm_prob=opts.masked_lm_prob,
                max_predictions=opts.max_predictions, ngram=opts.ngram, vocab_size=self.vocab_size)
        else:
            masked = ids
            positions = mlm_ids = np.zeros((len(span), opts.max_predictions), np.int64)
            num = np.zeros(len(span), np.int64)
        weights = (np.arange(opts.max_predictions)[None, :] < num[:, None]).astype(np.float32)
        stats.tokens += int(lengths.sum())
        stats.masked += int(num.sum())
        stats.maskable += int((lengths - 3).sum())
        stats.swapped += int(label.sum())
        return encode_examples({
            "input_ids": masked, "input_mask": valid.astype(np.int64), "segment_ids": segment,
            "token_boundary": boundary, "masked_lm_positions": positions, "masked_lm_ids": mlm_ids,
            "masked_lm_weights": weights, "next_sentence_labels": label[:, None],
        })


# ------------------------------------------------------------------------------------------------ serialization
def _varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _packed_varints(values):
    """int array [N, W] (non-negative, < 2**35) → (one bytes object, per-row byte counts int64 [N] or None when
    every row takes W bytes): the rows' values as packed protobuf varints, all rows at once."""
    values = np.asarray(values)
    if values.size == 0:
        return b"", None
    top = int(values.max())
    if values.min() < 0 or top >= 1 << 35:
        raise ValueError("feature values must be in [0, 2**35)")
    if top < 0x80:  # one byte per value: the common case (masks, segments, labels, short positions)
        return values.astype(np.uint8).tobytes(), None
    width = (top.bit_length() + 6) // 7
    values = values.astype(np.int64)
    nbytes = np.ones(values.shape, np.int8)
    for k in range(1, width):
        nbytes += values >= (1 << (7 * k))
    k = np.arange(width, dtype=np.int8)
    digits = ((values[..., None] >> (7 * k.astype(np.int64))) & 0x7F).astype(np.uint8)
    digits |= (k < nbytes[..., None] - 1).astype(np.uint8) << 7
    return digits[k < nbytes[..., None]].tobytes(), nbytes.sum(axis=1, dtype=np.int64)


def encode_examples(features):
    """Serializes N tf.train.Examples from {name: array [N, W]} (int arrays → int64_list, float → float_list).

    The bytes equal `tf.train.Example.SerializeToString(deterministic=True)` (map keys in sorted order), without
    building protobuf objects: values are packed for all N rows at once with numpy, and the framing of a
    fixed-width feature is computed once.
    """
    names = sorted(features)
    num = len(features[names[0]])
    fixed, varying = [], []  # per column: how to cut row i's bytes
    for column, name in enumerate(names):
        values = np.asarray(features[name])
        if values.dtype.kind == "f":
            payload, per_row = values.astype("<f4").tobytes(), None
            width, list_tag = 4 * values.shape[1], b"\x12"
        else:
            payload, per_row = _packed_varints(values)
            width, list_tag = values.shape[1], b"\x1a"
        key = name.encode()
        key_part = b"\n" + _varint(len(key)) + key + b"\x12"
        if per_row is None:
            values_list_header = b"\n" + _varint(width)
            feature_header = list_tag + _varint(len(values_list_header) + width) + values_list_header
            entry_len = len(key_part) + len(_varint(len(feature_header) + width)) + len(feature_header) + width
            prefix = b"\n" + _varint(entry_len) + key_part + _varint(len(feature_header) + width) + feature_header
            fixed.append((column, prefix, payload, width))
        else:
            ends = np.concatenate([[0], np.cumsum(per_row)]).tolist()
            varying.append((column, key_part, list_tag, payload, ends))
    header = functools.lru_cache(maxsize=None)(_varint)
    records = []
    parts = [b""] * len(names)
    for i in range(num):
        for column, prefix, payload, width in fixed:
            parts[column] = prefix + payload[i * width:(i + 1) * width]
        for column, key_part, list_tag, payload, ends in varying:
            body = payload[ends[i]:ends[i + 1]]
            values_list = b"\n" + header(len(body)) + body
            feature = list_tag + header(len(values_list)) + values_list
            entry = key_part + header(len(feature)) + feature
            parts[column] = b"\n" + header(len(entry)) + entry
        features_bytes = b"".join(parts)
        records.append(b"\n" + header(len(features_bytes)) + features_bytes)
    return records
