# PosMLP-Video-S pre-trained on ImageNet-1k (paper Sec. 3.4 / 4.2): the same backbone on images
# (NCHW treated as T = 1) with the units that span time (PoTGU) replaced by identity gates; the
# pre-training settings follow PosMLP (image), i.e. configs/posmlp/posmlp-t_8xb120_in1k.py.
# Afterwards: tools/model_converters/posmlp_video_inflate.py (or init_cfg inflate=True) for video.
_base_ = '../posmlp/posmlp-t_8xb120_in1k.py'

model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.PosMLPVideo',
        arch='s',
        image_mode=True,
        drop_path_rate=0.1,
        out_indices=(3, )),
    head=dict(in_channels=576))
