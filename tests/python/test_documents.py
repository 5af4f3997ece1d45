"""The reference documents' own code, run as written, against seqattn.

000's numpy walk-through (X, W_Q, W_K, W_V of three tokens) and 003's two PyTorch classes
(SingleHeadSelfAttention, MultiHeadSelfAttention) with their padding mask, transcribed from
../shared/seeds/ with their Chinese comments shortened to English.
"""

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

import seqattn


def test_numpy_walkthrough_of_document_000():
    X = np.array([[1.0, 0.0], [1.0, 1.0], [0.1, 1.0]])  # 我, 喜欢, 苹果
    W_Q = np.array([[1.0, 0.0], [0.0, 1.0]])
    W_K = np.array([[1.0, 1.0], [1.0, 1.0]])
    W_V = np.array([[1.0, 0.0], [1.0, 1.0]])
    Q = X @ W_Q
    K = X @ W_K
    V = X @ W_V
    d_k = K.shape[-1]
    scores = (Q @ K.T) / np.sqrt(d_k)

    def softmax(x, axis=-1):
        e_x = np.exp(x - np.max(x, axis=axis, keepdims=True))
        return e_x / np.sum(e_x, axis=axis, keepdims=True)

    attn_weights = softmax(scores, axis=-1)
    output = attn_weights @ V

    f32 = [a.astype(np.float32) for a in (Q, K, V)]
    out, weights = seqattn.attention(*f32, return_weights=True)
    assert out.shape == (3, 2) and weights.shape == (3, 3)
    np.testing.assert_allclose(out, output, atol=1e-6)
    np.testing.assert_allclose(weights, attn_weights, atol=1e-6)


class SingleHeadSelfAttention(nn.Module):
    def __init__(self, d_model, d_k):
        super().__init__()
        self.W_Q = nn.Linear(d_model, d_k, bias=False)
        self.W_K = nn.Linear(d_model, d_k, bias=False)
        self.W_V = nn.Linear(d_model, d_model, bias=False)
        self.d_k = d_k

    def forward(self, x, mask=None):
        batch_size, seq_len, _ = x.shape
        Q = self.W_Q(x)
        K = self.W_K(x)
        V = self.W_V(x)
        scores = torch.matmul(Q, K.transpose(-2, -1))
        scores = scores / torch.sqrt(torch.tensor(self.d_k, dtype=torch.float32))
        if mask is not None:
            scores = scores.masked_fill(mask == 0, -1e9)
        attention_weights = F.softmax(scores, dim=-1)
        output = torch.matmul(attention_weights, V)
        return output, attention_weights


class MultiHeadSelfAttention(nn.Module):
    def __init__(self, d_model, num_heads):
        super().__init__()
        assert d_model % num_heads == 0
        self.num_heads = num_heads
        self.d_k = d_model // num_heads
        self.d_v = d_model // num_heads
        self.W_Q = nn.Linear(d_model, d_model, bias=False)
        self.W_K = nn.Linear(d_model, d_model, bias=False)
        self.W_V = nn.Linear(d_model, d_model, bias=False)
        self.fc = nn.Linear(d_model, d_model, bias=False)

    def forward(self, x, mask=None):
        batch_size, seq_len, _ = x.shape
        Q = self.W_Q(x)
        K = self.W_K(x)
        V = self.W_V(x)
        Q = Q.view(batch_size, seq_len, self.num_heads, self.d_k).transpose(1, 2)
        K = K.view(batch_size, seq_len, self.num_heads, self.d_k).transpose(1, 2)
        V = V.view(batch_size, seq_len, self.num_heads, self.d_v).transpose(1, 2)
        scores = torch.matmul(Q, K.transpose(-2, -1)) / torch.sqrt(
            torch.tensor(self.d_k, dtype=torch.float32))
        if mask is not None:
            mask = mask.unsqueeze(1)
            scores = scores.masked_fill(mask == 0, -1e9)
        attention_weights = F.softmax(scores, dim=-1)
        head_outputs = torch.matmul(attention_weights, V)
        concat_output = head_outputs.transpose(1, 2).contiguous().view(batch_size, seq_len, -1)
        output = self.fc(concat_output)
        return output, attention_weights


def document_inputs():
    torch.manual_seed(3)
    x = torch.randn(2, 5, 128)
    mask = torch.ones(2, 5, 5)
    mask[:, :, 4] = 0  # the fifth token is padding
    return x, mask


@torch.no_grad()
def test_single_head_class_of_document_003():
    x, mask = document_inputs()
    layer = SingleHeadSelfAttention(d_model=128, d_k=128)
    expected, expected_weights = layer(x, mask)
    # The same projections, then seqattn for the attention: the mask as a boolean keep mask.
    q, k, v = layer.W_Q(x), layer.W_K(x), layer.W_V(x)
    out, weights = seqattn.attention(q, k, v, mask=mask != 0, return_weights=True)
    assert isinstance(out, torch.Tensor) and out.shape == (2, 5, 128)
    torch.testing.assert_close(out, expected, atol=2e-6, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=2e-6, rtol=0)
    # The same padding through key_lengths (every sequence has 4 valid keys).
    by_length = seqattn.attention(q, k, v, key_lengths=[4, 4])
    torch.testing.assert_close(by_length, expected, atol=2e-6, rtol=0)


@torch.no_grad()
def test_multi_head_class_of_document_003():
    x, mask = document_inputs()
    layer = MultiHeadSelfAttention(d_model=128, num_heads=8)
    expected, expected_weights = layer(x, mask)
    # seqattn's layer with the document's weights (no biases, bshd heads as in the class).
    ours = seqattn.MultiHeadAttention(128, 8, bias=False, batch_first=True)
    ours.set_weights(q=layer.W_Q.weight, k=layer.W_K.weight, v=layer.W_V.weight,
                     o=layer.fc.weight)
    out, weights = ours(x, key_padding_mask=mask[:, 0, :] == 0, need_weights=True,
                        average_attn_weights=False)
    torch.testing.assert_close(out, expected, atol=2e-6, rtol=0)
    torch.testing.assert_close(weights, expected_weights, atol=2e-6, rtol=0)
    # And attention() on the class's own head views (strided [B, H, S, D], no copies).
    b, s = 2, 5
    heads = [f(x).view(b, s, 8, 16).transpose(1, 2) for f in (layer.W_Q, layer.W_K, layer.W_V)]
    out_heads = seqattn.attention(*heads, mask=(mask != 0)[:, None])
    merged = layer.fc(out_heads.transpose(1, 2).reshape(b, s, 128))
    torch.testing.assert_close(merged, expected, atol=2e-6, rtol=0)
