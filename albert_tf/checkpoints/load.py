"""Loading a pretrained model from any handle (albert_tf.checkpoints.handles: a pretrained-model directory, an
`albert-tf export` BASE or BASE/N, a released model's name such as `albert_base_v2` or `hf:OWNER/NAME`, a Hugging
Face ALBERT directory) in one call, when the caller does not know which model it holds:

    model = albert_tf.load_pretrained("albert_base_v2")   # an AlbertPretrainer; an AlbertEncoder from an export

    load_encoder(path)        a trainable AlbertEncoder (= AlbertEncoder.from_pretrained)
    load_model(path)          (model, InitSource): an AlbertPretrainer when the handle holds the pretraining heads,
                              else its AlbertEncoder (an export, a Hugging Face AlbertModel, an encoder's checkpoint)
    load_pretrained(path)     load_model's model

The models' own `from_pretrained` reads the same handles (albert_tf.modeling.base), as every command's --init does.
"""
from albert_tf.checkpoints import handles
from albert_tf.modeling.encoder import AlbertEncoder
from albert_tf.modeling.pretrainer import AlbertPretrainer


def load_encoder(path, dropout=True):
    """A trainable Keras AlbertEncoder from any handle (albert_tf.checkpoints.handles)."""
    return AlbertEncoder.from_pretrained(path, dropout=dropout)


def load_model(path, flag="--init"):
    """(model, InitSource) for any handle, or for its InitSource (handles.resolve_init's, when the caller has read
    it already): an AlbertPretrainer when the handle's checkpoint holds a whole pretrainer (a model dir, a release,
    a Hugging Face AlbertForPreTraining), else its AlbertEncoder (an export, a Hugging Face AlbertModel, an
    encoder's or a task model's checkpoint)."""
    source = path if isinstance(path, handles.InitSource) else handles.resolve_init(path, flag=flag)
    if source.kind != "export":
        pretrainer = AlbertPretrainer(source.config)
        try:
            handles.restore(pretrainer, source)
            return pretrainer, source
        except ValueError:
            pass  # no heads in it: its encoder below
    encoder = AlbertEncoder(source.config)
    handles.restore(encoder, source, part="encoder")
    return encoder, source


def load_pretrained(handle):
    """The model any handle holds, in one call (`load_model` without its InitSource): an AlbertPretrainer from a
    pretrained-model directory, a released model's name (`albert_base_v2`, `hf:OWNER/NAME`) or a Hugging Face
    AlbertForPreTraining directory; an AlbertEncoder from an export or a Hugging Face AlbertModel directory."""
    return load_model(handle, flag="load_pretrained")[0]
