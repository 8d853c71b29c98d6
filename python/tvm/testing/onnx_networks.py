# Licensed to the Apache Software Foundation (ASF) under one
# or more contributor license agreements.  See the NOTICE file
# distributed with this work for additional information
# regarding copyright ownership.  The ASF licenses this file
# to you under the Apache License, Version 2.0 (the
# "License"); you may not use this file except in compliance
# with the License.  You may obtain a copy of the License at
#
#   http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing,
# software distributed under the License is distributed on an
# "AS IS" BASIS, WITHOUT WARRANTIES OR CONDITIONS OF ANY
# KIND, either express or implied.  See the License for the
# specific language governing permissions and limitations
# under the License.
"""Real network architectures as ONNX models with seeded random weights, for tuning tests.

ResNet-18 (He et al., 2016) and MobileNetV2 (Sandler et al., 2018) are built
layer by layer with :mod:`onnx.helper`; nothing is downloaded.  Batch
normalization is folded into the convolutions, as in an inference export, so
every convolution carries a bias.  Weights are drawn from a seeded generator
with He initialization, which keeps activations of order one through the
network, so comparisons of outputs between runtimes are meaningful.

The same file feeds TVM's ONNX frontends (Relay, Relax) and ONNX Runtime.  A
*reduced* network keeps the architecture's first stage(s) on a small image, for
tests that tune every task of a network in seconds.

Only :mod:`onnx` and :mod:`numpy` are needed to build and describe a network.
"""
import logging
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np

logger = logging.getLogger(__name__)

INPUT_NAME = "data"
OUTPUT_NAME = "logits"
OPSET = 13
IR_VERSION = 8

# Stages of ResNet-18: (output channels, stride of the first block); two blocks each.
RESNET18_STAGES = ((64, 1), (128, 2), (256, 2), (512, 2))
# Inverted-residual groups of MobileNetV2: (expansion, output channels, blocks, stride).
MOBILENET_V2_GROUPS = (
    (1, 16, 1, 1),
    (6, 24, 2, 2),
    (6, 32, 3, 2),
    (6, 64, 4, 2),
    (6, 96, 3, 1),
    (6, 160, 3, 2),
    (6, 320, 1, 1),
)
NETWORKS = ("resnet18", "mobilenet_v2")


@dataclass(frozen=True)
class NetworkSpec:
    """The shape of one network.

    Parameters
    ----------
    name : str
        ``"resnet18"`` or ``"mobilenet_v2"``.
    image_size : int
        Height and width of the input image (batch 1, 3 channels, float32).
    stages : Optional[int]
        How many stages (ResNet) or inverted-residual groups (MobileNetV2) to
        keep; all of them when None.
    num_classes : int
        Outputs of the classifier.
    seed : int
        Seed of the weights.
    """

    name: str
    image_size: int = 224
    stages: Optional[int] = None
    num_classes: int = 1000
    seed: int = 0

    @property
    def input_shape(self) -> Tuple[int, int, int, int]:
        """The shape of the input tensor, NCHW."""
        return (1, 3, self.image_size, self.image_size)

    @property
    def label(self) -> str:
        """A short name: the network, and the reduction when there is one."""
        if self.stages is None and self.image_size == 224:
            return self.name
        kept = "" if self.stages is None else f"-{self.stages}stage"
        return f"{self.name}{kept}-{self.image_size}px"


def full(name: str, seed: int = 0) -> NetworkSpec:
    """The whole network on a 224x224 image with 1000 classes."""
    _check_name(name)
    return NetworkSpec(name, seed=seed)


def reduced(name: str, seed: int = 0) -> NetworkSpec:
    """The first stage of ``name`` on a 32x32 image with 10 classes: a few tasks, tuned in seconds.

    ResNet-18 keeps its stem and first stage (three tunable convolution and
    dense workloads); MobileNetV2 its stem and first two inverted-residual
    groups.
    """
    _check_name(name)
    return NetworkSpec(
        name, image_size=32, stages=1 if name == "resnet18" else 2, num_classes=10, seed=seed
    )


def _check_name(name: str) -> None:
    if name not in NETWORKS:
        raise ValueError(f"unknown network {name!r}; choose from {', '.join(NETWORKS)}")


class _GraphBuilder:
    """Collects ONNX nodes and seeded initializers of one graph."""

    def __init__(self, seed: int):
        from onnx import helper  # pylint: disable=import-outside-toplevel

        self.helper = helper
        self.rng = np.random.default_rng(seed)
        self.nodes: list = []
        self.initializers: list = []
        self.count = 0

    def _name(self, kind: str) -> str:
        self.count += 1
        return f"{kind}_{self.count}"

    def constant(self, kind: str, value: np.ndarray) -> str:
        from onnx import numpy_helper  # pylint: disable=import-outside-toplevel

        name = self._name(kind)
        self.initializers.append(numpy_helper.from_array(value, name))
        return name

    def node(
        self, op_type: str, inputs: Sequence[str], output: Optional[str] = None, **attributes
    ) -> str:
        output = output or self._name(op_type.lower())
        self.nodes.append(
            self.helper.make_node(op_type, list(inputs), [output], name=output, **attributes)
        )
        return output

    def conv(
        self, data: str, channels: int, filters: int, kernel: int, stride: int = 1, group: int = 1
    ) -> str:
        """A convolution with a folded batch normalization: He-initialized weight, small bias."""
        fan_in = channels // group * kernel * kernel
        weight = self.rng.standard_normal((filters, channels // group, kernel, kernel))
        weight = (weight * np.sqrt(2.0 / fan_in)).astype("float32")
        bias = (0.01 * self.rng.standard_normal(filters)).astype("float32")
        pad = kernel // 2
        return self.node(
            "Conv",
            [data, self.constant("weight", weight), self.constant("bias", bias)],
            kernel_shape=[kernel, kernel],
            strides=[stride, stride],
            pads=[pad, pad, pad, pad],
            group=group,
        )

    def relu6(self, data: str) -> str:
        low = self.constant("min", np.array(0.0, dtype="float32"))
        high = self.constant("max", np.array(6.0, dtype="float32"))
        return self.node("Clip", [data, low, high])

    def classifier(self, data: str, channels: int, classes: int) -> str:
        pooled = self.node("GlobalAveragePool", [data])
        flat = self.node("Flatten", [pooled], axis=1)
        weight = (self.rng.standard_normal((classes, channels)) / np.sqrt(channels)).astype(
            "float32"
        )
        bias = (0.01 * self.rng.standard_normal(classes)).astype("float32")
        return self.node(
            "Gemm",
            [flat, self.constant("fc_weight", weight), self.constant("fc_bias", bias)],
            output=OUTPUT_NAME,
            transB=1,
        )


def _resnet18(graph: _GraphBuilder, data: str, stages: int) -> Tuple[str, int]:
    out = graph.node("Relu", [graph.conv(data, 3, 64, 7, stride=2)])
    out = graph.node("MaxPool", [out], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    channels = 64
    for filters, first_stride in RESNET18_STAGES[:stages]:
        for block in range(2):
            stride = first_stride if block == 0 else 1
            body = graph.node("Relu", [graph.conv(out, channels, filters, 3, stride)])
            body = graph.conv(body, filters, filters, 3)
            shortcut = out
            if stride != 1 or channels != filters:
                shortcut = graph.conv(out, channels, filters, 1, stride)
            out = graph.node("Relu", [graph.node("Add", [body, shortcut])])
            channels = filters
    return out, channels


def _mobilenet_v2(graph: _GraphBuilder, data: str, stages: int) -> Tuple[str, int]:
    out = graph.relu6(graph.conv(data, 3, 32, 3, stride=2))
    channels = 32
    for expansion, filters, blocks, first_stride in MOBILENET_V2_GROUPS[:stages]:
        for block in range(blocks):
            stride = first_stride if block == 0 else 1
            hidden = channels * expansion
            body = out
            if expansion != 1:
                body = graph.relu6(graph.conv(body, channels, hidden, 1))
            body = graph.relu6(graph.conv(body, hidden, hidden, 3, stride, group=hidden))
            body = graph.conv(body, hidden, filters, 1)
            out = graph.node("Add", [body, out]) if stride == 1 and channels == filters else body
            channels = filters
    return graph.relu6(graph.conv(out, channels, 1280, 1)), 1280


def make_model(spec: NetworkSpec):
    """The ONNX model of ``spec`` (opset 13), checked by :func:`onnx.checker.check_model`.

    Parameters
    ----------
    spec : NetworkSpec
        The network, e.g. ``full("resnet18")`` or ``reduced("mobilenet_v2")``.

    Returns
    -------
    model : onnx.ModelProto
        One input ``data`` (1, 3, H, W) and one output ``logits`` (1, classes), float32.
    """
    import onnx  # pylint: disable=import-outside-toplevel
    from onnx import TensorProto, helper  # pylint: disable=import-outside-toplevel

    _check_name(spec.name)
    every = len(RESNET18_STAGES) if spec.name == "resnet18" else len(MOBILENET_V2_GROUPS)
    stages = every if spec.stages is None else spec.stages
    if not 1 <= stages <= every:
        raise ValueError(f"{spec.name} has {every} stages; cannot keep {spec.stages}")
    if spec.image_size < 32 or spec.image_size % 32:
        raise ValueError(f"the image size must be a positive multiple of 32, got {spec.image_size}")
    graph = _GraphBuilder(spec.seed)
    body = _resnet18 if spec.name == "resnet18" else _mobilenet_v2
    features, channels = body(graph, INPUT_NAME, stages)
    graph.classifier(features, channels, spec.num_classes)
    model = helper.make_model(
        helper.make_graph(
            graph.nodes,
            spec.label.replace("-", "_"),
            [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, list(spec.input_shape))],
            [helper.make_tensor_value_info(OUTPUT_NAME, TensorProto.FLOAT, [1, spec.num_classes])],
            initializer=graph.initializers,
        ),
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="tvm.testing.onnx_networks",
    )
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def single_op_model(op_type: str, shape: Sequence[int] = (1, 8)):
    """An ONNX model of one element-wise operator (e.g. ``Relu``, ``Identity``): nothing to tune.

    Input ``data`` and output ``out`` of ``shape``, float32.
    """
    import onnx  # pylint: disable=import-outside-toplevel
    from onnx import TensorProto, helper  # pylint: disable=import-outside-toplevel

    graph = helper.make_graph(
        [helper.make_node(op_type, [INPUT_NAME], ["out"])],
        op_type.lower(),
        [helper.make_tensor_value_info(INPUT_NAME, TensorProto.FLOAT, list(shape))],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, list(shape))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def write_model(spec: NetworkSpec, path: str):
    """Write the ONNX model of ``spec`` to ``path``; returns the model."""
    import onnx  # pylint: disable=import-outside-toplevel

    model = make_model(spec)
    onnx.save(model, path)
    logger.info("wrote %s (%s) to %s", spec.label, spec, path)
    return model


def random_input(spec: NetworkSpec, seed: int = 1) -> Dict[str, np.ndarray]:
    """The network's input, a seeded standard-normal image, by input name."""
    rng = np.random.default_rng(seed)
    return {INPUT_NAME: rng.standard_normal(spec.input_shape).astype("float32")}


def onnxruntime_session(path: str, threads: int = 2):
    """An ONNX Runtime CPU session of the model at ``path`` with ``threads`` intra-op threads."""
    import onnxruntime  # pylint: disable=import-outside-toplevel

    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    return onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])


@dataclass(frozen=True)
class Layer:
    """A convolution or dense layer of a model, with what a tuning task sees of it.

    ``data`` and ``weight`` are the operand shapes (NCHW / OIHW for convolutions,
    (batch, features) / (units, features) for dense layers), ``flop`` counts a
    multiply-add as two.
    """

    op: str
    data: Tuple[int, ...]
    weight: Tuple[int, ...]
    strides: Tuple[int, ...]
    group: int
    flop: float


def layers(model) -> List[Layer]:
    """The convolution and dense (Gemm) layers of ``model``, in graph order."""
    import onnx  # pylint: disable=import-outside-toplevel

    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    shapes = {}
    for info in (
        list(inferred.graph.input) + list(inferred.graph.value_info) + list(inferred.graph.output)
    ):
        shapes[info.name] = tuple(dim.dim_value for dim in info.type.tensor_type.shape.dim)
    for tensor in inferred.graph.initializer:
        shapes[tensor.name] = tuple(tensor.dims)
    found = []
    for node in inferred.graph.node:
        if node.op_type not in ("Conv", "Gemm"):
            continue
        attributes = {attr.name: onnx.helper.get_attribute_value(attr) for attr in node.attribute}
        data, weight, out = shapes[node.input[0]], shapes[node.input[1]], shapes[node.output[0]]
        if node.op_type == "Conv":
            group = int(attributes.get("group", 1))
            macs = int(np.prod(out)) * weight[1] * weight[2] * weight[3]
            strides = tuple(attributes.get("strides", (1, 1)))
            found.append(Layer("conv2d", data, weight, strides, group, 2.0 * macs))
        else:
            macs = int(np.prod(out)) * data[1]
            found.append(Layer("dense", data, weight, (), 1, 2.0 * macs))
    return found
