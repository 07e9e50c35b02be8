"""What a test case may hand a student's answer to, for a property that needs more than one
call (a gradient): importable, so that a case passes it to the sandbox by name, never as code
(see :mod:`d2lattn.grading.master.calls`)."""


def input_gradient(function, X, weights):
    """The gradient with respect to ``X`` (an MXNet array) of ``sum(function(X) * weights)``,
    ``weights`` broadcast against ``function(X)``: ``X``'s shape. ``X`` itself is left as it
    is (a copy records the gradient)."""
    from mxnet import autograd

    X = X.copy()
    X.attach_grad()
    with autograd.record():
        loss = (function(X) * weights).sum()
    loss.backward()
    return X.grad


class BigramScorer:
    """``next_log_probs`` of a bigram table ``{previous token or "<bos>": {next token:
    probability}}``: called with a prefix (a tuple of tokens), the log-probability of each
    token that may follow its last token (of "<bos>" for the empty prefix)."""

    def __init__(self, table):
        self.table = table

    def __call__(self, prefix):
        import math

        return {token: math.log(p)
                for token, p in self.table[prefix[-1] if prefix else "<bos>"].items()}
