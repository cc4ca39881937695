window.MINFER_SAMPLES = [];
