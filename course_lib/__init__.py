"""course_lib: the small library behind "From RNNs to Transformers".

One module per topic; each chapter of the book studies one of them.

    rnn         RNN, LSTM and GRU cells and layers from their equations (torch.nn-compatible)
    charlm      a character-level language model on those layers, and text generation
    attention   score functions, masked softmax, scaled dot-product attention, masks
    seq2seq     RNN encoder-decoder without attention, with Bahdanau and Luong attention
    decoding    greedy decoding, sampling (temperature, top-k, top-p) and beam search,
                over one step protocol shared by every model that writes tokens
    multihead   multi-head attention (torch.nn.MultiheadAttention-compatible), the KV cache
    positional  sinusoidal and learned positional encodings, RoPE, ALiBi
    transformer encoder/decoder layers and stacks (torch.nn.Transformer*-compatible), Transformer
    gpt         a decoder-only GPT with a key/value cache
    llama       the modern decoder: RMSNorm, rotary positions, SwiGLU, grouped-query attention,
                Hugging Face Llama weights (from_hf / to_hf)
    mlm         a BERT-style masked language model, its recipe, and two count baselines
    bpe         byte-level byte-pair encoding, GPT-2's tokenizer: learning merges, encoding, decoding
    recipes     one training recipe per model family, shared by the chapters and benchmarks/
    data        generated tasks (dates, copy/reverse), Vocab, batching, the pydoc_data text corpus
    train       the training loop (tqdm, seeding, device) and held-out metrics
    widgets     the explorers (anywidget) that also work on the static site
    viz         attention heatmaps and other figures
    evidence    the evidence protocol: per-seed summaries, comparisons asserted with a margin,
                committed sweeps (course_lib/sweeps/*.json), a page's live run against them, glue
    exercises   auto-checks for the exercises (the expected outputs they compare with are data;
                the reference solutions stay with the grader, in coursekit/ of the repository)

Argument checks shared by the modules live in `_checks`.
"""

__version__ = "0.2.0"
