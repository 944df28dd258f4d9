"""A TFX user's module file for the digits: written against TFX's APIs only, nothing of shardflow.

Transform decodes ImageExampleGen's raw pixel bytes and scales them; the Trainer reads the
transformed examples through TFX's data accessor and exports a model serving tf.Examples.
"""
import tensorflow as tf
import tensorflow_transform as tft
import tf_keras as keras  # TFX 1.16 with keras 3 installed beside: tf.keras would be Keras 3
from tfx.components.trainer.fn_args_utils import FnArgs
from tfx_bsl.public import tfxio

HEIGHT, WIDTH, CLASSES = 28, 28, 10
IMAGE, LABEL = "x", "y"
EPOCHS, BATCH = 8, 64


def preprocessing_fn(inputs):
    pixels = tf.io.decode_raw(tf.reshape(inputs[IMAGE], [-1]), tf.uint8)  # one uint8 per pixel
    image = tf.reshape(tf.cast(pixels, tf.float32) / 255.0, [-1, HEIGHT, WIDTH, 1])
    return {"image": image, LABEL: tf.reshape(inputs[LABEL], [-1])}


def _dataset(files, fn_args: FnArgs, schema):
    options = tfxio.TensorFlowDatasetOptions(batch_size=BATCH, label_key=LABEL, shuffle_seed=0)
    return fn_args.data_accessor.tf_dataset_factory(files, options, schema)  # repeats


def _model():
    """LeNet-5 (ReLU, max pooling, "same" padding): the textbook network for 28x28 digits."""
    image = keras.Input(shape=(HEIGHT, WIDTH, 1), name="image")
    x = keras.layers.Conv2D(6, 5, padding="same", activation="relu")(image)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Conv2D(16, 5, padding="same", activation="relu")(x)
    x = keras.layers.MaxPooling2D(2)(x)
    x = keras.layers.Dense(120, activation="relu")(keras.layers.Flatten()(x))
    x = keras.layers.Dense(84, activation="relu")(x)
    model = keras.Model({"image": image}, keras.layers.Dense(CLASSES, activation="softmax")(x))
    model.compile(keras.optimizers.Adam(1e-3), "sparse_categorical_crossentropy", ["accuracy"])
    return model


def _serving(model, transform_output):
    model.tft_layer = transform_output.transform_features_layer()
    raw_spec = transform_output.raw_feature_spec()
    raw_spec.pop(LABEL)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="examples")])
    def serve(serialized):
        features = model.tft_layer(tf.io.parse_example(serialized, raw_spec))
        return {"outputs": model({"image": features["image"]})}

    return serve


def run_fn(fn_args: FnArgs):
    transform_output = tft.TFTransformOutput(fn_args.transform_output)
    schema = transform_output.transformed_metadata.schema
    keras.utils.set_random_seed(0)  # seeded and deterministic: the accuracy test compares fixed numbers
    tf.config.experimental.enable_op_determinism()
    model = _model()
    model.fit(_dataset(fn_args.train_files, fn_args, schema), epochs=EPOCHS,
              steps_per_epoch=max(1, fn_args.train_steps // EPOCHS),
              validation_data=_dataset(fn_args.eval_files, fn_args, schema), validation_steps=fn_args.eval_steps)
    model.save(fn_args.serving_model_dir, save_format="tf",
               signatures={"serving_default": _serving(model, transform_output)})
