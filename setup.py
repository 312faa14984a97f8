"""estimator-dist: TF1-style Estimator code under MirroredStrategy, multi-worker and TPU."""
import pathlib

from setuptools import find_packages, setup

try:  # setuptools 64+, which builds editable wheels (PEP 660).
    from setuptools.command.editable_wheel import editable_wheel
except ImportError:
    editable_wheel = None

_HERE = pathlib.Path(__file__).parent

# One coherent set of wheels per Python (docs/install.md says why):
# - Python 3.9-3.11: TensorFlow 2.15, the last release with tf.estimator, on its CPU wheel,
#   as the Estimator programs being brought here run today.
# - Python 3.12-3.13: current TensorFlow (2.16-2.21; 2.15 has no wheel there) with tf-keras,
#   which tensorflow-estimator's Keras and the TF1 layers need. tf-keras requires the full
#   `tensorflow` wheel, so that is the wheel here (a CPU-only machine logs one line that no
#   CUDA driver was found), never `tensorflow-cpu` beside it.
# On a GPU machine see docs/install.md for each end.
_TENSORFLOW = [
    'tensorflow-cpu==2.15.1; python_version < "3.12"',
    'numpy>=1.23,<2; python_version < "3.12"',
    'tensorflow>=2.16,<2.22; python_version >= "3.12"',
    'tf-keras>=2.16,<2.22; python_version >= "3.12"',
    'numpy>=1.26; python_version >= "3.12"',
    # What TensorFlow 2.15 required beside itself and 2.16+ does not, which Estimator code
    # relies on: TensorBoard (tf.summary.* in a model_fn, Estimator's own summaries).
    'tensorboard>=2.16,<2.22; python_version >= "3.12"',
]

# The interpreter-start hook (estimator_dist_startup.py, docs/install.md): a .pth file in
# site-packages. A data file's folder is relative to the wheel's data folder
# (NAME.data/data), so "../purelib" is the wheel's purelib category, which pip installs into
# site-packages, for a wheel and an editable wheel alike.
_STARTUP_HOOK = [("../purelib", ["estimator_dist_startup.pth"])]


def _editable_wheel_with_data_files():
    """setuptools' editable wheel, with the data files in it: setuptools asks the
    distribution for ``has_data``, which it does not have (``has_data_files``), and so
    leaves them out of editable installs."""

    class EditableWheel(editable_wheel):
        def _run_install(self, category):
            super()._run_install(category)
            if category == "data" and not hasattr(self.distribution, "has_data"):
                self.run_command("install_data")

    return {"editable_wheel": EditableWheel} if editable_wheel else {}

setup(
    name="estimator-dist",
    version="0.1.0",
    description=(
        "Run tf.estimator model_fn/input_fn code under MirroredStrategy, multi-worker "
        "clusters and TPUs, and migrate it to TF2."
    ),
    long_description=(_HERE / "README.md").read_text(encoding="utf-8"),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    packages=find_packages(include=["estimator_dist", "estimator_dist.*", "model_fns",
                                    "model_fns.*", "input_fns", "input_fns.*"]),
    py_modules=["estimator_dist_startup"],
    data_files=_STARTUP_HOOK,
    cmdclass=_editable_wheel_with_data_files(),
    # PEP 561: the packages' annotations are for their users' type checkers too.
    package_data={name: ["py.typed"] for name in ("estimator_dist", "model_fns", "input_fns")},
    python_requires=">=3.9,<3.14",
    install_requires=_TENSORFLOW + [
        "tensorflow-estimator==2.15.0",
        "tqdm>=4.60",
        "PyYAML>=5.4",
    ],
    # pytest<9: pytest-xdist's xdist_group marks (the suite's shared runs, docs/testing.md)
    # rename each test through an attribute pytest 9 no longer reads, and so do nothing.
    extras_require={
        "report": ["matplotlib>=3.5"],
        "test": ["pytest>=7,<9", "pytest-timeout>=2.1", "pytest-xdist>=3.5", "matplotlib>=3.5",
                 "pandas>=1.3,<3", "ruff>=0.5", "mypy>=1.10",
                 # A library built on Estimator (tests/end_to_end/test_libraries.py); it
                 # pins no TensorFlow. tensorflow-ranking, which pins tensorflow<2.16, is
                 # installed by that test with --no-deps (docs/install.md).
                 "deepctr==0.9.4"],
    },
    entry_points={
        "console_scripts": [
            "estimator-dist-train=estimator_dist.train:script",
            "estimator-dist-launch=estimator_dist.launch:script",
            "estimator-dist-report=estimator_dist.report:script",
            "estimator-dist-migrate=estimator_dist.migrate:script",
            "estimator-dist-doctor=estimator_dist.doctor:script",
        ],
    },
    classifiers=[
        "Programming Language :: Python :: 3.9",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "License :: OSI Approved :: Apache Software License",
    ],
)
