# CPVT Table 2 (direct evaluation at 160x160 of a model trained at 224x224, no fine-tuning): CPVT-B (PEG 0-1),
# 80.5 top-1 at 160 (paper). Test only: train with cpvt-b-peg0-1_8xb128_in1k.py and evaluate its checkpoint with
#   python tools/test.py configs/cpvt/paper_tables/cpvt-b-peg0-1_8xb128_in1k-160px.py CKPT
# The PEG needs no interpolation at other sizes. Resize keeps DeiT's crop ratio 0.875 (short side
# 182, centre crop 160); the paper does not state its test resize.
_base_ = ['./cpvt-b-peg0-1_8xb128_in1k.py']
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=182, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=160),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
