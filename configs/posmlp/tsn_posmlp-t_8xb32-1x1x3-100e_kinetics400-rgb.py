# TSN (mmaction2's Recognizer2D) with PosMLP-T frame features: mmaction2's TSN recipe with the backbone swapped.
# Recognizer2D hands the backbone's output to the head, which takes one NCHW tensor: SingleTensorBackbone returns
# the last requested output of PosMLP's tuple (docs/compatibility.md, "2-D video recognizers").
# No weights are trained with this recipe here: it shows the drop-in use, not a reproduced result.
_base_ = ['mmaction::recognition/tsn/tsn_imagenet-pretrained-r50_8xb32-1x1x3-100e_kinetics400-rgb.py',
          '../_base_/runner.py']

pretrained = 'checkpoints/posmlp-t_in1k_mmposmlp.pth'
model = dict(
    backbone=dict(
        _delete_=True,
        type='mmposmlp.SingleTensorBackbone',
        backbone=dict(
            type='mmposmlp.PosMLP',
            arch='tiny',
            out_indices=(3, ),
            drop_path_rate=0.1,
            init_cfg=dict(type='Pretrained', checkpoint=pretrained, prefix='backbone.'))),
    cls_head=dict(in_channels=768))
