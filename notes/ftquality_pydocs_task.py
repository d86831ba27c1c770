"""Builds (1) a pretraining corpus from python3-doc's reST sources (one document per file, one sentence per line)
and (2) a 3-class GLUE task in SST-2's layout: which section (library / tutorial / reference) a sentence comes from,
balanced, dev = sentences of held-out files (no file in both splits)."""
import glob, os, random, re, sys

SRC = "/usr/share/doc/python3.11/html/_sources"
SECTIONS = ("library", "tutorial", "reference")
END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(])")
ROLE = re.compile(r":[\w:]+:`!?~?([^`<]*?)\s*(<[^>]*>)?`")


def sentences(path):
    out, para = [], []
    lines = open(path, encoding="utf-8").read().splitlines() + [""]
    for line in lines:
        if not line.strip() or line[:1].isspace() or line.startswith((".. ", "..", "=", "-", "*", "~", "^", "+", "|", ">>>")):
            if para:
                text = ROLE.sub(r"\1", " ".join(para)).replace("``", "").replace("*", "")
                out += [s for s in END.split(text) if len(s.split()) >= 5 and "\t" not in s]
            para = []
            continue
        if re.fullmatch(r"[=\-~^*#\"+]{3,}", line.strip()):
            para = []
            continue
        para.append(line.strip())
    return out


def main(out_dir, dev_fraction=0.2, seed=0):
    rng = random.Random(seed)
    os.makedirs(out_dir, exist_ok=True)
    files = sorted(glob.glob(f"{SRC}/**/*.rst.txt", recursive=True))
    with open(f"{out_dir}/corpus.txt", "w", encoding="utf-8") as f:
        docs = 0
        for path in files:
            s = sentences(path)
            if len(s) >= 4:
                f.write(("\n" if docs else "") + "\n".join(s) + "\n")
                docs += 1
    per = {}
    for label, section in enumerate(SECTIONS):
        paths = sorted(glob.glob(f"{SRC}/{section}/**/*.rst.txt", recursive=True))
        rng.shuffle(paths)
        split = {"train": [], "dev": []}
        total = sum(len(sentences(p)) for p in paths)
        for p in paths:  # whole files go to dev until it holds dev_fraction of the section's sentences
            name = "dev" if len(split["dev"]) < dev_fraction * total else "train"
            split[name] += [(s, label) for s in sentences(p)]
        per[section] = split
    task = {}
    for name in ("train", "dev"):
        n = min(len(per[s][name]) for s in SECTIONS)
        rows = [r for s in SECTIONS for r in rng.sample(per[s][name], n)]
        rng.shuffle(rows)
        task[name] = rows
        os.makedirs(f"{out_dir}/task", exist_ok=True)
        with open(f"{out_dir}/task/{name}.tsv", "w", encoding="utf-8") as f:
            f.write("sentence\tlabel\n" + "".join(f"{s}\t{l}\n" for s, l in rows))
    print(f"corpus: {docs} documents; task: {len(task['train'])} train / {len(task['dev'])} dev sentences "
          f"(balanced over {SECTIONS})")


if __name__ == "__main__":
    main(sys.argv[1])
