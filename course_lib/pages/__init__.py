"""What serves the chapters' pages, apart from the models and their training (the package's top level).

    evidence                  per-seed summaries, comparisons asserted with a margin, glue
    sweeps                    committed sweeps (course_lib/sweeps/*.json): load, the kernels they
                              ran on, a page's live run against them, their figure
    viz                       attention heatmaps, colours, source listings (show_source)
    rnn_experiments           chapter 2's experiments on trained language models
    alignment                 chapter 4: where attention looks, on tasks whose alignment is known
    positional_experiments    chapter 8's extrapolation experiment
    transformer_experiments   chapter 9's experiments (layer norm, heads, logit lens)
    ablation                  chapter 9: take a part of a Transformer away, measure what is lost

The models never import from here (tests/test_config_structure.py).
"""
