"""course_lib: the small library behind "From RNNs to Transformers".

One module per topic; each chapter of the book studies one of them.

    rnn         RNN, LSTM and GRU cells and layers from their equations (torch.nn-compatible)
    attention   score functions, masked softmax, scaled dot-product attention, masks
    seq2seq     RNN encoder-decoder without attention, with Bahdanau and Luong attention; greedy and beam decoding
    data        generated tasks (dates, copy/reverse), Vocab, batching, the pydoc_data text corpus
    train       the training loop (tqdm, seeding, device) and held-out metrics
    multihead   multi-head attention (torch.nn.MultiheadAttention-compatible)
    positional  sinusoidal and learned positional encodings
    transformer encoder/decoder layers and stacks (torch.nn.Transformer*-compatible), Transformer,
                greedy and beam search, a decoder-only GPT
    widgets     the explorers (anywidget) that also work on the static site
    viz         attention heatmaps and other figures
    exercises   auto-checks for the exercises
    release     writes the student edition (python -m course_lib.release student OUTDIR)
"""

__version__ = "0.1.0"
