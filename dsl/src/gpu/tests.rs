//! What the GPU backend does on the host: input preparation, the comparison
//! rule, and (without a GPU) a clear error instead of a panic.

use super::*;
use crate::interp::testkit::*;

#[test]
fn close_is_relative_above_one_and_absolute_below() {
    assert!(close(1000.0, 1000.009));
    assert!(!close(1000.0, 1000.02));
    assert!(close(5e-6, 0.0));
    assert!(!close(2e-5, 0.0));
    assert!(close(f64::NAN, f64::NAN));
    assert!(!close(f64::NAN, 0.0));
    assert!(close(f64::INFINITY, f64::INFINITY));
    assert!(!close(f64::INFINITY, f64::NEG_INFINITY));
}

#[test]
fn first_mismatch_names_output_and_row() {
    let want = Outputs { reward: vec![1.0, 2.0], adv: vec![0.0, 0.5], advantage: vec![0.0, 0.5] };
    let mut got = want.clone();
    assert_eq!(first_mismatch(&got, &want), None);
    got.adv[1] = 0.6;
    assert_eq!(first_mismatch(&got, &want), Some(Mismatch { output: "adv", row: 1, got: 0.6, want: 0.5 }));
}

#[test]
fn host_inputs_are_f32_columns_offsets_and_group_ids() {
    let p = gated_program();
    let ir = ir::lower(&p);
    let t = table(&[2, 3], &[("grade(word)", &[0.1, 0.2, 0.3, 0.4, 0.5]), ("cost", &[1.0, 2.0, 3.0, 4.0, 5.0])]);
    let inputs = HostInputs::new(&p, &ir, &t, &EvalOptions::default(), &Reach::outputs(&p)).expect("valid table");
    assert_eq!(inputs.offsets, vec![0, 2, 5]);
    assert_eq!(inputs.gid, vec![0, 0, 1, 1, 1]);
    assert_eq!(inputs.features[0].as_deref(), Some(&[0.1f32, 0.2, 0.3, 0.4, 0.5][..]));
    // Two features read, three distinct output columns, five rows, 4 bytes.
    assert_eq!(inputs.min_bytes(&ir), 4 * 5 * (2 + 3));
}

#[test]
fn host_inputs_check_the_table_like_the_cpu_backend() {
    let p = gated_program();
    let ir = ir::lower(&p);
    let t = table(&[2], &[("grade(word)", &[0.1, 0.2])]);
    let err = HostInputs::new(&p, &ir, &t, &EvalOptions::default(), &Reach::outputs(&p)).expect_err("cost is missing");
    assert_eq!(err, EvalError::MissingFeature { key: "cost".to_string() });
}

/// Without a GPU (or without the feature) construction fails with a message
/// that says what to do; it never panics. On a machine with a GPU and the
/// feature, it must evaluate like the CPU backend.
#[test]
fn new_reports_a_missing_gpu_or_agrees_with_the_cpu() {
    let p = gated_program();
    let compiled_in = cfg!(feature = "cuda");
    match GpuProgram::new(&p) {
        Err(GpuError::NotCompiled) => {
            assert!(!compiled_in, "NotCompiled from a build with the feature");
            assert!(GpuError::NotCompiled.to_string().contains("--features cuda"));
        }
        Err(e @ (GpuError::NoDriver | GpuError::NoNvrtc)) => {
            eprintln!("no GPU here ({e}); checked that construction fails cleanly");
            assert!(compiled_in, "a probe failure from a build without the feature");
            assert!(e.to_string().contains("--device cpu"));
        }
        Err(e) => panic!("unexpected GPU error: {e}"),
        Ok(gpu) => {
            let sizes: Vec<usize> = (0..300).map(|g| 1 + g % 9).collect();
            let n: usize = sizes.iter().sum();
            let fb: Vec<f64> = (0..n).map(|i| ((i * 7919) % 13) as f64 / 16.0).collect();
            let c: Vec<f64> = (0..n).map(|i| ((i * 104_729) % 17) as f64 / 2.0).collect();
            let t = table(&sizes, &[("grade(word)", &fb), ("cost", &c)]);
            let want = interp::eval(&p, &t, &EvalOptions::default()).expect("finite");
            let got = gpu.eval(&t, &EvalOptions::default()).expect("the GPU evaluates");
            assert_eq!(first_mismatch(&got, &want), None);
            let unfused = gpu.eval_unfused(&t, &EvalOptions::default()).expect("the GPU evaluates");
            assert_eq!(first_mismatch(&unfused, &want), None);
        }
    }
}
