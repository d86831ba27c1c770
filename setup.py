"""albert_tf: pretrain ALBERT with Keras 3 and TensorFlow, from one CPU to a TPU pod."""
from setuptools import find_packages, setup

# CPU and GPU machines. tensorflow-text (the in-graph tokenizer) requires the same minor of `tensorflow`.
TENSORFLOW = ["tensorflow>=2.18,<2.22", "tensorflow-text>=2.18,<2.22"]
SERVING = ["tensorflow-serving-api>=2.18,<2.22"]
TEST = ["pytest>=8,<10", "pytest-xdist>=3,<4"]
# The other libraries' own code, for tests/test_interop.py (`convert --to hf|keras-hub` checked by transformers and
# keras-hub): torch pinned to the 2.13 CPU wheel's range; transformers 5 (PyTorch and safetensors: it removed
# TensorFlow), whose tokenizers tests/test_hf_tokenizer.py checks too (CI checks transformers 4.57's in a small
# environment of its own: .ci/run); keras-hub needs tensorflow-text >= 2.20, so these stay out of `test` (the
# TPU-wheel and TensorFlow 2.18 environments of CI install `test`). About a minute of installing.
INTEROP = ["torch>=2.13,<2.14", "transformers>=5.24,<6", "keras-hub>=0.32,<0.33"]
# What TPUClusterResolver(tpu=NAME) imports on a pod slice to ask the Cloud TPU API for the slice's hosts:
# TensorFlow's tpu/client/client.py imports `googleapiclient.discovery` and `oauth2client.client` (TensorFlow
# tries the cloud-tpu-client package first, whose last release is from 2020; its fallback needs only these two).
CLOUD_TPU = ["google-api-python-client>=1.8,<3", "oauth2client>=4.1.3,<5"]

setup(
    name="albert_tf",
    version="0.1.0",
    description="ALBERT pretraining (SOP, n-gram masking, LAMB) with Keras 3 and TensorFlow",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.14",
    packages=find_packages(include=["albert_tf", "albert_tf.*"]),
    package_data={"albert_tf": ["configs/*.json", "cloud/on_worker.sh"]},
    # TensorFlow is an extra, not a requirement: a TPU VM's TensorFlow (its image's, or tensorflow-tpu) must not be
    # replaced by the CPU `tensorflow` wheel, which pip would do for a requirement on `tensorflow` (tensorflow-tpu
    # is another distribution). Without it, `import tensorflow` names what to install (albert_tf/_requirements.py).
    install_requires=[
        "keras>=3.10,<4",  # requires no TensorFlow itself
        "numpy>=1.26,<3",
        "sentencepiece>=0.2,<0.3",
        # safetensors: reading Hugging Face checkpoints without torch (numpy API only).
        "safetensors>=0.4,<1",
    ],
    extras_require={
        "tf": TENSORFLOW,
        # A machine without TensorFlow that drives TPUs: the last TPU wheel, with a libtpu that loads with it
        # (0.0.32 and later abort at `import tensorflow`), and the Cloud TPU API client.
        "tpu": ["tensorflow-tpu>=2.20,<2.21", "libtpu>=0.0.14,<0.0.32"] + CLOUD_TPU,
        # A TPU VM image, which has its own TensorFlow: only the Cloud TPU API client (what tpu/install.sh installs).
        "cloud-tpu": CLOUD_TPU,
        "beam": ["apache-beam>=2.60,<3"],
        # The official TF Serving protos: export's warm-up records and the README's gRPC client.
        "serving": SERVING,
        # The viewer for pretrain's and finetune's event files (TensorFlow 2.21 no longer depends on it; the events
        # are written without it).
        "tensorboard": ["tensorboard>=2.18,<2.22"],
        # `albert-tf convert --release hf:OWNER/NAME`: reading the Hugging Face hub.
        "hf": ["huggingface_hub>=0.20,<3"],  # transformers 5 wants >=1.31,<3
        "test": TEST,
        # `albert-tf convert --to keras-hub` builds the preset with keras-hub's own classes.
        "keras-hub": ["keras-hub>=0.32,<0.33"],
        # A development checkout on a CPU/GPU machine (README's set-up command): the tests, TensorFlow, and the
        # libraries the interop tests check against.
        "dev": TEST + TENSORFLOW + SERVING + INTEROP,
    },
    entry_points={"console_scripts": ["albert-tf=albert_tf.cli:main"]},
)
