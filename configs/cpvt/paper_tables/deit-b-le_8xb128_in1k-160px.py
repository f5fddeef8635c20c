# CPVT Table 2 "DeiT-base" evaluated at 160x160 without fine-tuning (trained at 224x224): 79.1 top-1 (paper).
# Test only: train with deit-b-le_8xb128_in1k.py and evaluate its checkpoint with
#   python tools/test.py configs/cpvt/paper_tables/deit-b-le_8xb128_in1k-160px.py CKPT
# The learnable table is resized bicubically to the new grid (DeiT / mmpretrain resize_pos_embed).
# Resize keeps DeiT's crop ratio 0.875 (short side 182, centre crop 160).
_base_ = ['./deit-b-le_8xb128_in1k.py']
test_pipeline = [
    dict(type='LoadImageFromFile'),
    dict(type='ResizeEdge', scale=182, edge='short', backend='pillow', interpolation='bicubic'),
    dict(type='CenterCrop', crop_size=160),
    dict(type='PackInputs'),
]
val_dataloader = dict(dataset=dict(pipeline=test_pipeline))
test_dataloader = dict(dataset=dict(pipeline=test_pipeline))
