from . import Target

TARGET = Target("local")
