# The image docs/cluster.md's manifests run: the package installed as `pip install .`
# installs it on Python 3.12 (current TensorFlow with tf-keras), or over the GPU build of
# the same TensorFlow.
#
#   docker build -t estimator-dist:0.1.0 .
#   docker build --build-arg TENSORFLOW=gpu -t estimator-dist:0.1.0-gpu .
#
# The GPU pin is setup.py's current-TensorFlow pin (tests/test_dockerfile.py checks it).
# For TensorFlow 2.15 build FROM python:3.11-slim: setup.py then installs 2.15.
FROM python:3.12-slim

# cpu: setup.py's wheels; gpu: the same TensorFlow with its CUDA libraries, as
# docs/install.md says.
ARG TENSORFLOW=cpu

WORKDIR /opt/estimator-dist
COPY setup.py README.md estimator_dist_startup.py estimator_dist_startup.pth ./
COPY estimator_dist estimator_dist
COPY model_fns model_fns
COPY input_fns input_fns

RUN case "$TENSORFLOW" in \
      cpu) pip install --no-cache-dir . ;; \
      gpu) pip install --no-cache-dir "tensorflow[and-cuda]>=2.16,<2.22" . ;; \
      *) echo "TENSORFLOW must be cpu or gpu. Received: TENSORFLOW=$TENSORFLOW" >&2; exit 2 ;; \
    esac

# Model dirs and data come from volumes or buckets; the manifests give the command.
WORKDIR /workspace
CMD ["python", "-m", "estimator_dist.train"]
