# Wave-MLP Table 7 ("All": the token-FC connects all the tokens of a row / column, Wave-MLP-T*): 80.0 top-1
# (paper; 16M, 2.3G). Recipe: ../wavemlp-t-dw_8xb128_in1k.py. The token-FC is the windowed one with a window of
# 2L - 1 (L - 1 zero padding) over rows / columns of L tokens, so its weights are tied to the 224x224 input
# ("its parameter configure is corrected to the size of input image", Sec. 4.4): other input sizes are refused.
_base_ = ['../wavemlp-t-dw_8xb128_in1k.py']
model = dict(backbone=dict(window_size='all', img_size=224))
