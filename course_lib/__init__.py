"""course_lib: the small library behind "From RNNs to Transformers".

The ground floor holds the models and their training, one module per topic; each chapter of the
book studies one of them.

    rnn         RNN, LSTM and GRU cells and layers from their equations (torch.nn-compatible)
    adding      the adding problem (chapters 1 and 2): its data, a regressor, its training
    charlm      a character-level language model on those layers, text generation, its recipe
    attention   score functions, masked softmax, scaled dot-product attention, masks
    seq2seq     RNN encoder-decoder without attention, with Bahdanau and Luong attention
    seq2seq_train   its training recipe (Seq2SeqRecipe, train_seq2seq)
    decoding    greedy decoding, sampling (temperature, top-k, top-p) and beam search,
                over one step protocol shared by every model that writes tokens
    multihead   multi-head attention (torch.nn.MultiheadAttention-compatible), the KV cache
    positional  sinusoidal and learned positional encodings, RoPE, ALiBi
    transformer encoder/decoder layers and stacks (torch.nn.Transformer*-compatible), Transformer
    transformer_train   its training recipe (TransformerRecipe, train_transformer, the paper's schedule)
    gpt         a decoder-only GPT with a key/value cache
    llama       the modern decoder: RMSNorm, rotary positions, SwiGLU, grouped-query attention,
                Hugging Face Llama weights (from_hf / to_hf)
    mlm         a BERT-style masked language model, its recipe, and two count baselines
    bpe         byte-level byte-pair encoding, GPT-2's tokenizer: learning merges, encoding, decoding
    data        generated tasks (dates, copy/reverse), Vocab, batching, the pydoc_data text corpus
    train       the training loop (tqdm, seeding, device), held-out metrics, and the language
                models' recipe (LMRecipe, GPT_RECIPE, train_lm)

What serves the pages stands apart and imports the ground floor, never the reverse:

    pages       the chapters' experiments, the evidence protocol (evidence, sweeps) and figures (viz)
    widgets     the explorers (anywidget) that also work on the static site
    exercises   auto-checks for the exercises (the expected outputs they compare with are data;
                the reference solutions stay with the grader, in coursekit/ of the repository)

Argument checks shared by the modules live in `_checks`.
"""

__version__ = "0.2.0"
