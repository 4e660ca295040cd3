// The tutorial's transformer, with TensorDict and TensorDictModule in C++: the classical blocks
// (TokensToQKV, SplitHeads, Attention, SkipLayerNorm, FFN) are plain LibTorch modules; wrapped
// in TensorDictModules that say which entries they read and write, they chain inside an ordinary
// torch::nn::Sequential, and blocks stack into a 6-block encoder and decoder.
//
// Checks the shapes the tutorial prints and exits non-zero when one differs.
#include <torch/torch.h>

#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "td/core/tensordict.h"
#include "td/nn/common.h"

namespace nn = torch::nn;
using td::nn::TensorDictModule;

struct TokensToQKVImpl : nn::Module {
  TokensToQKVImpl(int64_t to_dim, int64_t from_dim, int64_t latent_dim)
      : q(register_module("q", nn::Linear(to_dim, latent_dim))),
        k(register_module("k", nn::Linear(from_dim, latent_dim))),
        v(register_module("v", nn::Linear(from_dim, latent_dim))) {}
  std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& x_to,
                                                          const at::Tensor& x_from) {
    return {q(x_to), k(x_from), v(x_from)};
  }
  nn::Linear q, k, v;
};
TORCH_MODULE(TokensToQKV);

struct SplitHeadsImpl : nn::Module {
  explicit SplitHeadsImpl(int64_t num_heads) : num_heads(num_heads) {}
  std::tuple<at::Tensor, at::Tensor, at::Tensor> forward(const at::Tensor& q,
                                                          const at::Tensor& k,
                                                          const at::Tensor& v) {
    const int64_t batch_size = q.size(0), to_num = q.size(1), latent_dim = q.size(2);
    const int64_t from_num = k.size(1);
    const int64_t d_tensor = latent_dim / num_heads;
    return {q.reshape({batch_size, to_num, num_heads, d_tensor}).transpose(1, 2),
            k.reshape({batch_size, from_num, num_heads, d_tensor}).transpose(1, 2),
            v.reshape({batch_size, from_num, num_heads, d_tensor}).transpose(1, 2)};
  }
  int64_t num_heads;
};
TORCH_MODULE(SplitHeads);

struct AttentionImpl : nn::Module {
  AttentionImpl(int64_t latent_dim, int64_t to_dim)
      : softmax(register_module("softmax", nn::Softmax(-1))),
        out(register_module("out", nn::Linear(latent_dim, to_dim))) {}
  std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k,
                                             const at::Tensor& v) {
    const int64_t batch_size = q.size(0), n_heads = q.size(1), to_num = q.size(2),
                  d_in = q.size(3);
    at::Tensor attn = softmax(at::matmul(q, k.transpose(2, 3)) / d_in);
    at::Tensor o = at::matmul(attn, v);
    o = out(o.transpose(1, 2).reshape({batch_size, to_num, n_heads * d_in}));
    return {o, attn};
  }
  nn::Softmax softmax;
  nn::Linear out;
};
TORCH_MODULE(Attention);

struct SkipLayerNormImpl : nn::Module {
  SkipLayerNormImpl(int64_t to_len, int64_t to_dim)
      : layer_norm(register_module("layer_norm", nn::LayerNorm(nn::LayerNormOptions({to_len, to_dim})))) {}
  at::Tensor forward(const at::Tensor& x_0, const at::Tensor& x_1) { return layer_norm(x_0 + x_1); }
  nn::LayerNorm layer_norm;
};
TORCH_MODULE(SkipLayerNorm);

struct FFNImpl : nn::Module {
  FFNImpl(int64_t to_dim, int64_t hidden_dim, double dropout_rate = 0.2)
      : FFN(register_module("FFN", nn::Sequential(nn::Linear(to_dim, hidden_dim), nn::ReLU(),
                                                  nn::Linear(hidden_dim, to_dim),
                                                  nn::Dropout(dropout_rate)))) {}
  at::Tensor forward(const at::Tensor& x) { return FFN->forward(x); }
  nn::Sequential FFN;
};
TORCH_MODULE(FFN);

// Each TensorDictModule maps outputs to the names the next one reads.
struct TransformerBlockTensorDictImpl : nn::Module {
  TransformerBlockTensorDictImpl(const std::string& to_name, const std::string& from_name,
                                 int64_t to_dim, int64_t to_len, int64_t from_dim,
                                 int64_t latent_dim, int64_t num_heads)
      : transformer_block(register_module(
            "transformer_block",
            nn::Sequential(
                TensorDictModule(TokensToQKV(to_dim, from_dim, latent_dim), {to_name, from_name},
                                 {"Q", "K", "V"}),
                TensorDictModule(SplitHeads(num_heads), {"Q", "K", "V"}, {"Q", "K", "V"}),
                TensorDictModule(Attention(latent_dim, to_dim), {"Q", "K", "V"},
                                 {"X_out", "Attn"}),
                TensorDictModule(SkipLayerNorm(to_len, to_dim), {"X_to", "X_out"}, {"X_to"}),
                TensorDictModule(FFN(to_dim, 4 * to_dim), {"X_to"}, {"X_out"}),
                TensorDictModule(SkipLayerNorm(to_len, to_dim), {"X_to", "X_out"}, {"X_to"})))) {}
  td::TensorDict forward(const td::TensorDict& x_tensor_dict) {
    return transformer_block->forward<td::TensorDict>(x_tensor_dict);
  }
  nn::Sequential transformer_block;
};
TORCH_MODULE(TransformerBlockTensorDict);

struct TransformerTensorDictImpl : nn::Module {
  TransformerTensorDictImpl(int64_t num_blocks, const std::string& to_name,
                            const std::string& from_name, int64_t to_dim, int64_t to_len,
                            int64_t from_dim, int64_t latent_dim, int64_t num_heads)
      : transformer(register_module("transformer", nn::ModuleList())) {
    for (int64_t i = 0; i < num_blocks; ++i) {
      transformer->push_back(TransformerBlockTensorDict(to_name, from_name, to_dim, to_len,
                                                        from_dim, latent_dim, num_heads));
    }
  }
  td::TensorDict forward(const td::TensorDict& x_tensor_dict) {
    for (const auto& block : *transformer) {
      block->as<TransformerBlockTensorDict>()->forward(x_tensor_dict);
    }
    return x_tensor_dict;
  }
  nn::ModuleList transformer;
};
TORCH_MODULE(TransformerTensorDict);

namespace {

int failures = 0;

void ExpectShape(const td::TensorDict& tokens, const std::string& key,
                 std::vector<int64_t> expected) {
  const auto actual = tokens.get(key).sizes().vec();
  if (actual != expected) {
    std::cerr << "shape of " << key << " is " << tokens.get(key).sizes() << ", expected "
              << at::IntArrayRef(expected) << "\n";
    ++failures;
  }
}

}  // namespace

int main() {
  torch::manual_seed(0);
  const int64_t to_dim = 5, from_dim = 6, latent_dim = 10, to_len = 3, from_len = 10,
                batch_size = 8, num_heads = 2;

  // One block.
  td::TensorDict tokens({{"X_to", torch::randn({batch_size, to_len, to_dim})},
                         {"X_from", torch::randn({batch_size, from_len, from_dim})}},
                        {batch_size});
  TransformerBlockTensorDict transformer_block("X_to", "X_from", to_dim, to_len, from_dim,
                                               latent_dim, num_heads);
  transformer_block(tokens);
  std::cout << tokens << "\n";
  ExpectShape(tokens, "Attn", {8, 2, 3, 10});
  ExpectShape(tokens, "K", {8, 2, 10, 5});
  ExpectShape(tokens, "Q", {8, 2, 3, 5});
  ExpectShape(tokens, "V", {8, 2, 10, 5});
  ExpectShape(tokens, "X_from", {8, 10, 6});
  ExpectShape(tokens, "X_out", {8, 3, 5});
  ExpectShape(tokens, "X_to", {8, 3, 5});
  // The output of the transformer layer is tokens["X_to"].
  std::cout << tokens.get("X_to").index({0}) << "\n";

  // An encoder: the same tokens for queries, keys and values.
  tokens = td::TensorDict({{"X_to", torch::randn({batch_size, to_len, to_dim})},
                           {"X_from", torch::randn({batch_size, from_len, from_dim})}},
                          {batch_size});
  TransformerTensorDict transformer_encoder(6, "X_to", "X_to", to_dim, to_len, to_dim,
                                            latent_dim, num_heads);
  transformer_encoder(tokens);
  ExpectShape(tokens, "X_to", {8, 3, 5});
  ExpectShape(tokens, "K", {8, 2, 3, 5});
  ExpectShape(tokens, "Attn", {8, 2, 3, 3});

  // A decoder: X_to maps to queries, X_from to keys and values.
  TransformerTensorDict transformer_decoder(6, "X_to", "X_from", to_dim, to_len, from_dim,
                                            latent_dim, num_heads);
  transformer_decoder(tokens);
  ExpectShape(tokens, "X_to", {8, 3, 5});
  ExpectShape(tokens, "K", {8, 2, 10, 5});
  ExpectShape(tokens, "Attn", {8, 2, 3, 10});
  std::cout << "tokens[\"X_to\"] after the decoder, first item:\n"
            << tokens.get("X_to").index({0}) << "\n";

  // Both models print like any LibTorch module (the first block of the encoder here).
  std::cout << *transformer_encoder->transformer[0] << "\n";
  std::cout << "encoder parameters: " << transformer_encoder->parameters().size()
            << ", decoder parameters: " << transformer_decoder->parameters().size() << "\n";
  // Per block: q, k, v and out Linear (8), two LayerNorms (4), the FFN's two Linear (4).
  if (transformer_encoder->parameters().size() != 6 * 16) {
    std::cerr << "expected 96 parameter tensors in the encoder\n";
    ++failures;
  }
  if (failures != 0) return EXIT_FAILURE;
  std::cout << "transformer example: OK\n";
  return EXIT_SUCCESS;
}
