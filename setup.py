"""albert_tf: pretrain ALBERT with Keras 3 and TensorFlow, from one CPU to a TPU pod."""
from setuptools import find_packages, setup

setup(
    name="albert_tf",
    version="0.1.0",
    description="ALBERT pretraining (SOP, n-gram masking, LAMB) with Keras 3 and TensorFlow",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    python_requires=">=3.10,<3.14",
    packages=find_packages(include=["albert_tf", "albert_tf.*"]),
    package_data={"albert_tf": ["configs/*.json"]},
    install_requires=[
        "tensorflow>=2.20,<2.22",
        "tensorflow-text>=2.20,<2.22",
        "keras>=3.10,<4",
        "numpy>=1.26,<3",
        "sentencepiece>=0.2,<0.3",
        # safetensors: reading Hugging Face checkpoints without torch (numpy API only).
        "safetensors>=0.4,<1",
    ],
    extras_require={
        "beam": ["apache-beam>=2.60,<3"],
        "serving": ["tensorflow-serving-api>=2.16"],
        "dev": ["pytest>=8,<10", "pytest-xdist>=3,<4"],
    },
    entry_points={"console_scripts": ["albert-tf=albert_tf.cli:main"]},
)
