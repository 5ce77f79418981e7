"""The model suite's models from Hugging Face transformers: each built from a config object
with seeded random weights (nothing is downloaded), small enough that the whole suite runs
on a 2-core machine, and with the library's own module code, so what is measured is the
graph a user of that library hands to torch.compile.

    gpt2       GPT2LMHeadModel: 2 layers, width 256, 4 heads, vocab 4096; sdpa attention
    bert       BertForSequenceClassification: 2 layers, width 256, padding mask, 2 classes
    llama      LlamaForCausalLM: 2 layers, width 256, 4 heads / 2 key-value heads (GQA),
               SwiGLU 688, RMSNorm, rotary, vocab 4096
    t5         T5ForConditionalGeneration: 2 + 2 layers, width 256, 8 heads, relative
               position bias, gated GELU, encoder 128 tokens, decoder 32
    vit        ViTForImageClassification: 64x64 images in 8x8 patches, 4 layers, width 256
    resnet     ResNetForImageClassification: basic blocks [2, 2, 2, 2], widths 32-256, 64x64
    mobilenet  MobileNetV2ForImageClassification: depth multiplier 0.5, 96x96, inverted
               residuals with depthwise 3x3 convolutions, ReLU6 (symmetric padding,
               as torchvision's, not TensorFlow's)
    convnext   ConvNextForImageClassification: depthwise 7x7, channels-last LayerNorm,
               GELU, layer scale; widths 32-256, depths [1, 1, 3, 1], 64x64

Every dropout is 0 and no KV cache is kept (use_cache=False): a compiled step must match
eager's, and an inference call returns only logits. `tiny=True` shrinks every size (one
layer or one block per stage, width 32 or 8-16 channels, 16 tokens, images at half
size) for the smoke test.
"""

from __future__ import annotations

import torch
import torch.nn as nn

from model_case import ModelCase, gen, lm_loss

INSTALL_HINT = ("the model suite builds these models with Hugging Face transformers, which "
                "is not installed: pip install -e '.[bench]' (or pip install transformers)")


def transformers_module():
    """The transformers package, or a clear error saying how to install it."""
    try:
        import transformers
    except ImportError as exc:
        raise MissingLibrary(INSTALL_HINT) from exc
    return transformers


class MissingLibrary(RuntimeError):
    """A model needs a library that is not installed."""


class Logits(nn.Module):
    """A transformers model called with keyword inputs, returning its logits alone."""

    def __init__(self, model: nn.Module, *names: str):
        super().__init__()
        self.model, self.names = model, names

    def forward(self, *inputs):
        return self.model(**dict(zip(self.names, inputs)), return_dict=True).logits


def _tokens(batch: int, seq: int, vocab: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, vocab, (batch, seq), generator=gen(seed))


def _images(batch: int, size: int) -> torch.Tensor:
    return torch.randn(batch, 3, size, size, generator=gen(1))


def _labels(batch: int, classes: int) -> torch.Tensor:
    return torch.randint(0, classes, (batch,), generator=gen(2))


# ---- language models ------------------------------------------------------------------------

def _lm_sizes(tiny: bool) -> dict:
    return dict(vocab=256, width=32, layers=1, seq=16) if tiny else \
        dict(vocab=4096, width=256, layers=2, seq=128)


def _gpt2(tiny: bool) -> nn.Module:
    s = _lm_sizes(tiny)
    cfg = transformers_module().GPT2Config(
        vocab_size=s["vocab"], n_positions=256, n_embd=s["width"], n_layer=s["layers"],
        n_head=4, bos_token_id=0, eos_token_id=0, resid_pdrop=0.0, embd_pdrop=0.0,
        attn_pdrop=0.0, use_cache=False, attn_implementation="sdpa")
    return Logits(transformers_module().GPT2LMHeadModel(cfg), "input_ids")


def _lm_batch(batch: int, tiny: bool):
    s = _lm_sizes(tiny)
    idx = _tokens(batch, s["seq"] + 1, s["vocab"])
    return (idx[:, :-1].contiguous(),), idx[:, 1:].contiguous()


def _llama(tiny: bool) -> nn.Module:
    s = _lm_sizes(tiny)
    cfg = transformers_module().LlamaConfig(
        vocab_size=s["vocab"], hidden_size=s["width"], intermediate_size=s["width"] * 43 // 16,
        num_hidden_layers=s["layers"], num_attention_heads=4, num_key_value_heads=2,
        max_position_embeddings=256, use_cache=False, attn_implementation="sdpa")
    return Logits(transformers_module().LlamaForCausalLM(cfg), "input_ids")


def _bert(tiny: bool) -> nn.Module:
    s = _lm_sizes(tiny)
    cfg = transformers_module().BertConfig(
        vocab_size=s["vocab"], hidden_size=s["width"], num_hidden_layers=s["layers"],
        num_attention_heads=4, intermediate_size=4 * s["width"], max_position_embeddings=256,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=2,
        attn_implementation="sdpa")
    return Logits(transformers_module().BertForSequenceClassification(cfg),
                  "input_ids", "attention_mask")


def _bert_batch(batch: int, tiny: bool):
    s = _lm_sizes(tiny)
    seq = s["seq"]
    lengths = torch.tensor([seq, seq - seq // 8, seq // 2, seq - 3] * batch)[:batch]
    mask = (torch.arange(seq)[None, :] < lengths[:, None]).long()
    return (_tokens(batch, seq, s["vocab"]), mask), _labels(batch, 2)


def _t5(tiny: bool) -> nn.Module:
    s = _lm_sizes(tiny)
    cfg = transformers_module().T5Config(
        vocab_size=s["vocab"], d_model=s["width"], d_kv=s["width"] // 8, d_ff=4 * s["width"],
        num_layers=s["layers"], num_heads=8, dropout_rate=0.0,
        feed_forward_proj="gated-gelu", use_cache=False, decoder_start_token_id=0,
        tie_word_embeddings=False)
    return Logits(transformers_module().T5ForConditionalGeneration(cfg),
                  "input_ids", "decoder_input_ids")


def _t5_batch(batch: int, tiny: bool):
    s = _lm_sizes(tiny)
    target = _tokens(batch, s["seq"] // 4, s["vocab"], seed=2)
    decoder_in = torch.cat([torch.zeros(batch, 1, dtype=target.dtype), target[:, :-1]], dim=1)
    return (_tokens(batch, s["seq"], s["vocab"]), decoder_in), target


# ---- vision models --------------------------------------------------------------------------

def _vit(tiny: bool) -> nn.Module:
    width, layers = (32, 1) if tiny else (256, 4)
    cfg = transformers_module().ViTConfig(
        image_size=_image_size("vit", tiny), patch_size=8, hidden_size=width,
        num_hidden_layers=layers, num_attention_heads=4, intermediate_size=4 * width,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, num_labels=10,
        attn_implementation="sdpa")
    return Logits(transformers_module().ViTForImageClassification(cfg), "pixel_values")


def _resnet(tiny: bool) -> nn.Module:
    widths, depths = ([8, 16], [1, 1]) if tiny else ([32, 64, 128, 256], [2, 2, 2, 2])
    cfg = transformers_module().ResNetConfig(
        embedding_size=widths[0], hidden_sizes=widths, depths=depths, layer_type="basic",
        num_labels=10)
    return Logits(transformers_module().ResNetForImageClassification(cfg), "pixel_values")


def _mobilenet(tiny: bool) -> nn.Module:
    cfg = transformers_module().MobileNetV2Config(
        depth_multiplier=0.25 if tiny else 0.5, image_size=_image_size("mobilenet", tiny),
        num_labels=10, classifier_dropout_prob=0.0, tf_padding=False)
    return Logits(transformers_module().MobileNetV2ForImageClassification(cfg), "pixel_values")


def _convnext(tiny: bool) -> nn.Module:
    widths, depths = ([8, 16], [1, 1]) if tiny else ([32, 64, 128, 256], [1, 1, 3, 1])
    cfg = transformers_module().ConvNextConfig(
        hidden_sizes=widths, depths=depths, num_stages=len(widths), num_labels=10,
        image_size=_image_size("convnext", tiny), drop_path_rate=0.0)
    return Logits(transformers_module().ConvNextForImageClassification(cfg), "pixel_values")


_IMAGE_SIZE = {"mobilenet": 96}


def _image_size(name: str, tiny: bool) -> int:
    return _IMAGE_SIZE.get(name, 64) // 2 if tiny else _IMAGE_SIZE.get(name, 64)


def _image_batch(name: str):
    def make(batch: int, tiny: bool):
        return (_images(batch, _image_size(name, tiny)),), _labels(batch, 10)
    return make


def _ce(logits, target):
    return torch.nn.functional.cross_entropy(logits, target)


HF_CASES = (
    ModelCase("gpt2", _gpt2, _lm_batch, lm_loss, 8,
              "GPT-2 (GPT2LMHeadModel): 2 layers, width 256, 4 heads, vocab 4096, sdpa "
              "attention; 128 tokens per sequence; loss: next-token cross-entropy",
              library="transformers"),
    ModelCase("bert", _bert, _bert_batch, _ce, 8,
              "BERT (BertForSequenceClassification): 2 layers, width 256, 4 heads, vocab "
              "4096, padding mask; 128 tokens; 2 classes", library="transformers"),
    ModelCase("llama", _llama, _lm_batch, lm_loss, 8,
              "LLaMA (LlamaForCausalLM): 2 layers, width 256, 4 heads / 2 KV heads, SwiGLU "
              "688, RMSNorm, rotary, vocab 4096; 128 tokens; loss: next-token cross-entropy",
              library="transformers"),
    ModelCase("t5", _t5, _t5_batch, lm_loss, 8,
              "T5 (T5ForConditionalGeneration): 2 encoder + 2 decoder layers, width 256, "
              "8 heads, gated GELU, relative position bias, vocab 4096; 128 encoder and 32 "
              "decoder tokens; loss: cross-entropy", library="transformers"),
    ModelCase("vit", _vit, _image_batch("vit"), _ce, 8,
              "ViT (ViTForImageClassification): 64x64 images, 8x8 patches, 4 layers, width "
              "256, 4 heads; 10 classes", library="transformers"),
    ModelCase("resnet", _resnet, _image_batch("resnet"), _ce, 16,
              "ResNet (ResNetForImageClassification): basic blocks [2, 2, 2, 2], widths "
              "32-64-128-256, BatchNorm, ReLU; 64x64 images; 10 classes",
              library="transformers"),
    ModelCase("mobilenet", _mobilenet, _image_batch("mobilenet"), _ce, 16,
              "MobileNetV2 (MobileNetV2ForImageClassification): depth multiplier 0.5, "
              "inverted residuals with depthwise 3x3 convolutions, BatchNorm, ReLU6; 96x96 "
              "images; 10 classes", library="transformers"),
    ModelCase("convnext", _convnext, _image_batch("convnext"), _ce, 16,
              "ConvNeXt (ConvNextForImageClassification): depthwise 7x7 convolutions, "
              "channels-last LayerNorm, GELU, layer scale; widths 32-256, depths [1, 1, 3, "
              "1]; 64x64 images; 10 classes", library="transformers"),
)
